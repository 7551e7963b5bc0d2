"""Upsert killed after every step boundary it passes (as tests/test_crash_steps.py does for the
put and the other multi-tag operations, with the same world, crash hook and recovery checks):
invariants hold right after the crash, janitor + repair return the store to clean, no COMPLETE
object but the upserted ones is lost, none leaks, and the store still works."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.models import ReplicateConfig
from mooncake_redis.testing.probes import complete_objects
from tests.test_crash_steps import (
    CFG,
    CLIENT,
    SIZE,
    Crash,
    Crasher,
    World,
    build,
    recover_and_check,
)


async def _upsert(w: World, keys: list[str], sizes: list[int], parents: list[str]) -> None:
    cfgs = [ReplicateConfig(parent_block_hash=p, replica_num=2) for p in parents]
    res = await w.svc.batch_upsert_start(CLIENT, keys, [[n] for n in sizes], cfgs)
    assert all(isinstance(r, list) for r in res), res
    assert await w.svc.batch_upsert_end(CLIENT, keys) == [None] * len(keys)


async def op_resize(w: World) -> None:
    """Case C on an inner node (A has child B): new buffers, the node kept."""
    await _upsert(w, [w.A], [2 * SIZE], [""])


async def op_new_with_parent(w: World) -> None:
    """Case A: a put under B (link, reserve, commit)."""
    await _upsert(w, [w.X], [SIZE], [w.B])


async def op_preempt(w: World) -> None:
    """The PROCESSING put P under A, preempted at once."""
    await _upsert(w, [w.P], [SIZE], [""])


async def op_batch(w: World) -> None:
    """Every case in one batch: in place (R), new size (S), preempted (P), absent (X)."""
    await _upsert(w, [w.R, w.S, w.P, w.X], [SIZE, 3 * SIZE, SIZE, SIZE], ["", "", "", w.B])


OPS: dict[str, tuple[Callable[[World], Awaitable[None]], Callable[[World], set[str]]]] = {
    "resize": (op_resize, lambda w: {w.A}),
    "new_with_parent": (op_new_with_parent, lambda w: set()),
    "preempt": (op_preempt, lambda w: set()),
    "batch": (op_batch, lambda w: {w.R, w.S}),
}


@pytest.mark.parametrize("name", list(OPS))
async def test_upsert_crash_after_every_step(make_service: Any, name: str) -> None:
    op, targets_of = OPS[name]
    svc: MasterService = await make_service(**CFG)
    w = await build(svc)
    rec = Crasher(svc, None)
    await op(w)
    steps = rec.steps
    assert steps, f"{name} passes no step boundary"
    if name in ("resize", "batch"):
        assert "upsert_start:reserved" in steps
    for i, step in enumerate(steps):
        svc = await make_service(**CFG)
        w = await build(svc)
        before = await complete_objects(svc)
        crasher = Crasher(svc, i)
        try:
            await op(w)
        except Crash:
            pass
        else:
            assert not crasher.dead
        await recover_and_check(make_service, before, targets_of(w), f"{name} @ {i}:{step}")
