"""The background loops' pause: it ends when told to stop, and it never hides a cancellation
(an evictor whose cancelled task went on renewing its lease kept every other worker out)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from mooncake_redis.pausing import pause


async def test_pause_ends_on_stop_or_after_its_time() -> None:
    stop = asyncio.Event()
    assert await pause(stop, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await pause(stop, 30) is True
    assert await pause(stop, 30) is True  # set: no wait


async def test_a_cancellation_during_the_pause_propagates() -> None:
    task = asyncio.create_task(pause(asyncio.Event(), 30))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is 3.11+")
async def test_a_lost_cancellation_is_raised_by_the_next_pause() -> None:
    started = asyncio.Event()

    async def loop() -> None:
        try:
            started.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # lost, as 3.11's wait_for loses one that meets the awaited result
        await pause(asyncio.Event(), 30)

    task = asyncio.create_task(loop())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
