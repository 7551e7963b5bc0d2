"""The write step of leaf eviction, shared by the leaf-first rounds and the orphan phase.

One fenced ``evict_leaves`` call per Redis node: each leaf is re-checked and evicted atomically
with all its keys; then the cross-shard unlinks run, the journal is acknowledged and the frees
reach the allocators, in that order (a crash in between leaves only journaled unlinks and outbox
frees, which the next evictor finishes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..records import _s
from .coordinator import EvictorLease, LeaseLost
from .goal import EvictionDeps
from .metrics import EvictionResult


async def ack_unlinks(ctx: Context, journal: Sequence[tuple[int, str]]) -> None:
    """Drops journaled unlink steps once they ran (``evict_unlinks_ack``)."""
    if journal:
        await ctx.run_sharded("evict_unlinks_ack", [(sh, [e]) for sh, e in journal])


@dataclass
class LeafOutcome:
    status: str  # 'ok' (evicted) or why not ('gone', 'inner', 'hard', 'lease', 'busy', 'soft')
    keys: list[str]  # object keys erased
    parent: str
    pshard: int


async def evict_leaves(
    deps: EvictionDeps,
    lease: EvictorLease,
    result: EvictionResult,
    leaves: Sequence[tuple[int, str]],
    allow_soft: bool,
) -> list[LeafOutcome]:
    """Evicts (shard, hash) leaves; counts what went into ``result``; one outcome per leaf."""
    await lease.ensure()
    calls = await deps.ctx.run_sharded(
        "evict_leaves",
        [(sh, [h]) for sh, h in leaves],
        [*lease.head(), 1 if allow_soft else 0],
    )
    out: list[LeafOutcome] = [LeafOutcome("gone", [], "", -1) for _ in leaves]
    conts: list[Any] = []
    frees: list[tuple[int, str]] = []
    journal: list[tuple[int, str]] = []
    fenced = False
    for idx, reply in calls:
        result.batches += 1
        if int(reply[0]) == 0:
            fenced = True
            continue
        _, rows, cs, fs, _now, js = reply
        journal.extend((int(sh), _s(e)) for sh, e in js)
        for i, (status, erased, nkeys, nbytes, parent, pshard) in zip(idx, rows):
            st = _s(status)
            if st != "ok":
                result.skip(st)
                out[i] = LeafOutcome(st, [], "", -1)
                continue
            keys = [_s(k) for k in erased]
            result.evicted_leaves += 1
            result.evicted_objects += len(keys)
            result.unregistered_keys += int(nkeys) - len(keys)
            result.evicted_keys.extend(keys)
            result.bytes += int(nbytes)
            out[i] = LeafOutcome("ok", keys, _s(parent), int(_s(pshard)))
        conts.extend(cs)
        frees.extend((int(sh), _s(e)) for sh, e in fs)
    await deps.ctx.checkpoint("evict:evicted")
    await deps.radix.finish_unlinks(conts)
    await ack_unlinks(deps.ctx, journal)
    await deps.allocator.apply_frees(frees)
    if fenced:
        deps.ctx.metrics.fenced += 1
        raise LeaseLost("an eviction script was fenced: a newer evictor epoch exists")
    return out
