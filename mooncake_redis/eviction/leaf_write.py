"""The write step of leaf eviction, shared by the leaf-first rounds and the orphan phase.

One fenced ``evict_leaves`` call per Redis node: each leaf is re-checked and evicted atomically
with all its keys; then the cross-shard unlinks run, the journal is acknowledged and the frees
reach the allocators, in that order (a crash in between leaves only journaled unlinks and outbox
frees, which the next evictor finishes). On a single Redis there are no cross-shard unlinks and
the frees are applied by the eviction call itself (lua/includes/evict_free.lua).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import lua_calls as lua
from ..segments import Usage
from .coordinator import EvictorLease, LeaseLost
from .goal import EvictionDeps
from .metrics import EvictionResult


@dataclass
class LeafOutcome:
    status: str  # 'ok' (evicted) or why not ('gone', 'inner', 'hard', 'lease', 'busy', 'soft')
    keys: list[str]  # object keys erased
    parent: str
    pshard: int


class LeafWrite(NamedTuple):
    outcomes: list[LeafOutcome]  # one per leaf, in the order given
    usage: Usage | None
    """the used ratio over the segments asked for, read by the one eviction call after its
    frees (a single Redis); None: not read, the caller reads it"""
    published: bool = False
    """the clocks asked for were published: the goal was met after the call"""


async def evict_leaves(
    deps: EvictionDeps,
    lease: EvictorLease,
    result: EvictionResult,
    leaves: Sequence[tuple[int, str]],
    allow_soft: bool,
    segments: Sequence[str] = (),
    clocks: lua.ClockAsk | None = None,
) -> LeafWrite:
    """Evicts (shard, hash) leaves; counts what went into ``result``. On a single Redis the
    frees are applied by the eviction call itself and ``segments`` read after them, which
    saves the pass two round trips (the outbox drain and the used ratio's read), and with
    ``clocks`` the call publishes the clocks if the goal is met after it (a third)."""
    await lease.ensure()
    calls = await lua.evict_leaves(deps.ctx, lease.head(), leaves, allow_soft, segments, clocks)
    out: list[LeafOutcome] = [LeafOutcome("gone", [], "", -1) for _ in leaves]
    conts: list[Any] = []
    frees: list[tuple[int, str]] = []
    journal: list[tuple[int, str]] = []
    fenced = False
    for call in calls:
        result.batches += 1
        if call.fenced:
            fenced = True
            continue
        journal.extend(call.journal)
        for i, row in call.rows:
            if row.status != "ok":
                result.skip(row.status)
                out[i] = LeafOutcome(row.status, [], "", -1)
                continue
            result.evicted_leaves += 1
            result.evicted_objects += len(row.erased)
            result.unregistered_keys += row.registered_keys - len(row.erased)
            result.evicted_keys.extend(row.erased)
            result.bytes += row.nbytes
            out[i] = LeafOutcome("ok", row.erased, row.parent, row.parent_shard)
        conts.extend(call.continuations)
        frees.extend(call.frees)
    await deps.ctx.checkpoint("evict:evicted")
    await deps.radix.finish_unlinks(conts)
    await lua.evict_unlinks_ack(deps.ctx, journal)
    await deps.allocator.apply_frees(frees)
    if fenced:
        deps.ctx.metrics.fenced += 1
        raise LeaseLost("an eviction script was fenced: a newer evictor epoch exists")
    usage = None
    read = calls[0].segments if len(calls) == 1 else None  # one call saw every free: none left
    if segments and read is not None and not frees:
        usage = Usage.over(segments, read)
    return LeafWrite(out, usage, len(calls) == 1 and calls[0].published)
