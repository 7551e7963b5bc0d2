"""A loop's pause that ends early when the loop is told to stop.

``asyncio.wait_for(event.wait(), t)`` is the usual spelling, but on Python 3.10 and 3.11 a
cancellation that arrives while wait_for handles its own timeout comes out as TimeoutError; a
loop that suppresses the timeout then never sees that it was cancelled; and 3.11's wait_for
also drops a cancellation that arrives as the awaited operation completes. Either way an
evictor whose task was cancelled kept renewing its lease, so no other worker could take over.
"""

from __future__ import annotations

import asyncio


async def pause(stop: asyncio.Event, seconds: float) -> bool:
    """Sleeps up to ``seconds`` or until ``stop`` is set; True once it is set. A cancellation
    of the caller always propagates, one lost on the way too (:func:`cancel_pending`)."""
    if cancel_pending():
        raise asyncio.CancelledError
    if stop.is_set():
        return True
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter}, timeout=max(0.0, seconds))
    finally:
        waiter.cancel()
    return stop.is_set()


def cancel_pending() -> bool:
    """Whether the current task was asked to cancel and the request was lost on the way.

    On Python 3.11 ``asyncio.wait_for`` drops a cancellation that arrives just as the awaited
    operation completes (redis-py sends each command through one when a socket timeout is
    set): the task goes on, marked as cancelling. A long-lived loop's :func:`pause` checks this
    and raises the cancellation it should have seen. (3.10 has no such mark: False.)"""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False
