"""The frees an erase leaves in its shards' outboxes reach the allocators and leave the outboxes:
on a single Redis in one atomic call (``outbox_apply``), on a cluster in two (``alloc_free``,
then ``outbox_ack``); either way idempotent, since a crash may leave entries to apply again."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis import lua_calls as lua

from .eviction_helpers import chain, evict_service, put_blocks
from .helpers import record_calls


class Stop(BaseException):
    pass


async def _allocated(svc: MasterService) -> int:
    return (await svc.eviction.usage()).allocated


async def test_outbox_frees_applied_and_dropped(make_service: Any) -> None:
    svc: MasterService = await evict_service(make_service, 1 << 30, segments=2)
    blocks = chain("o", 4) + chain("p", 4)
    assert await put_blocks(svc, blocks) == 8
    full = await _allocated(svc)
    assert full > 0

    async def stop_after_erase(step: str) -> None:
        if step == "erase:erased":
            raise Stop(step)

    # Removals that stop right after their erase: their frees wait in the outboxes.
    svc.fault_hook = stop_after_erase
    for blk, _ in blocks[::-1]:
        with pytest.raises(Stop):
            await svc.remove(blk, force=True)
    svc.fault_hook = None
    frees = await lua.outbox_peek(svc.ctx)
    assert len(frees) == 8 and len({sh for sh, _ in frees}) > 1
    assert await _allocated(svc) == full

    recorded = record_calls(svc)
    assert await svc.allocator.apply_frees(frees) == 8
    calls = [c.name for c in recorded]
    if svc.backend.cluster:  # per node: every free first, then every ack
        n = calls.count("alloc_free")
        assert n and calls == ["alloc_free"] * n + ["outbox_ack"] * (len(calls) - n)
    else:
        assert calls == ["outbox_apply"]
    assert await lua.outbox_peek(svc.ctx) == []
    assert await _allocated(svc) == 0
    # Applied again (a crash before the ack on a cluster): nothing changes, nothing fails.
    assert await svc.allocator.apply_frees(frees) == 8
    assert await _allocated(svc) == 0
    # The space is usable again.
    assert await put_blocks(svc, chain("q", 4)) == 4
    assert await _allocated(svc) == full // 2
