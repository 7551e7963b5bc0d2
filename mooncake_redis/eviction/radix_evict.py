"""Radix-aware cascading eviction (RFC section 3) without a depth limit.

Only leaves are evicted, each atomically with all its keys. Each shard keeps its evictable
leaves in a ZSET ordered by the leaf's newest lease (``K.leaves``, maintained by the radix
include). A pass reads every shard's index from the oldest end through a cursor, in bounded
windows (``evict_candidates``: leased, hard-pinned or still-being-written leaves are skipped and
the cursor moves past them), merges the windows in one heap by the policy's score, and chooses
victims globally until the bytes to free are covered. One fenced script call per node evicts
them (``evict_leaves``: re-checks each leaf, erases its objects, unregisters its keys); the
cross-shard unlink steps follow (``finish_unlinks``), the frees are applied to the segment
allocators, and the used ratio is read again before the next round. A parent whose last child
went is read by name (``evict_leaf_info``) and enters the heap in the same pass, so a chain of
any depth is reclaimed leaf first; the work of a pass grows with what it evicts (plus one
window per shard), never with the size of the tree.

Exact global order: a shard's unread leaves score at least its cursor's lease (policies only
add bonuses), so the best candidate in the heap is taken only when its score is not above the
cursor of any shard that still has unread leaves; otherwise those shards are read further
first (a bounded number of times per round).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .batch_evict import BatchEvictor, ratios
from .coordinator import EvictorLease, LeaseLost
from .metrics import EvictionResult
from .policy import LeafPolicy

if TYPE_CHECKING:
    from .mixin import EvictionMixin, Goal

MAX_REFILLS_PER_ROUND = 8


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(order=True)
class Candidate:
    score: float
    seq: int
    h: str = field(compare=False)
    shard: int = field(compare=False)
    s: float = field(compare=False)
    hits: int = field(compare=False)
    nbytes: int = field(compare=False)
    objects: int = field(compare=False)
    soft: bool = field(compare=False)
    parent: str = field(compare=False)
    pshard: int = field(compare=False)


@dataclass
class _ShardCursor:
    score: str = ""
    member: str = ""
    exhausted: bool = False
    k: int = 16  # window size, doubled when a window runs dry

    @property
    def horizon(self) -> float:
        return float(self.score) if self.score else float("-inf")


class RadixEvictor:
    def __init__(
        self,
        svc: EvictionMixin,
        lease: EvictorLease,
        policy: LeafPolicy,
        result: EvictionResult,
        goal: Goal,
    ) -> None:
        self.svc = svc
        self.lease = lease
        self.policy = policy
        self.result = result
        self.goal = goal
        self.cursors = [_ShardCursor() for _ in range(svc.keys.num_shards)]
        self.heap: list[Candidate] = []
        self.soft: list[Candidate] = []
        self.known: set[str] = set()  # leaves in the heap, set aside, or evicted this pass
        self.depth: dict[str, int] = {}
        self.allow_soft = False
        self._seq = itertools.count()
        self._horizon: float | None = None  # cached; None after any cursor moved

    # -- reading ----------------------------------------------------------------------------
    def _candidate(self, row: Sequence[Any], shard: int) -> Candidate:
        h, s, hits, nbytes, objs, soft, parent, pshard = row
        sv, hv = float(_s(s)), int(float(_s(hits)))
        return Candidate(
            self.policy.score(sv, hv),
            next(self._seq),
            _s(h),
            shard,
            sv,
            hv,
            int(nbytes),
            int(objs),
            bool(int(soft)),
            _s(parent),
            int(_s(pshard)),
        )

    def _add(self, c: Candidate) -> None:
        if c.h in self.known:
            return
        self.known.add(c.h)
        if c.soft and not self.allow_soft:
            self.soft.append(c)
        else:
            heapq.heappush(self.heap, c)

    async def refill(self, shards: list[int]) -> None:
        """Reads the next window of each shard's leaf index (one call per node)."""
        shards = [sh for sh in shards if not self.cursors[sh].exhausted]
        if not shards:
            return
        k = max(self.cursors[sh].k for sh in shards)
        limit = 4 * k + 64
        items = [(sh, [self.cursors[sh].score, self.cursors[sh].member]) for sh in shards]
        calls = await self.svc.run_sharded("evict_candidates", items, [k, limit])
        self._horizon = None
        self.result.candidate_reads += len(calls)
        batch = self.svc.config.script_batch_size
        for idx, (_now, groups) in calls:
            for i, (rows, cs, cm, exhausted, sk_lease, sk_hard, sk_busy) in zip(idx, groups):
                sh = shards[i]
                cur = self.cursors[sh]
                cur.score, cur.member, cur.exhausted = _s(cs), _s(cm), bool(int(exhausted))
                cur.k = min(batch, cur.k * 2)
                self.result.skip("lease", int(sk_lease))
                self.result.skip("hard", int(sk_hard))
                self.result.skip("busy", int(sk_busy))
                for row in rows:
                    self._add(self._candidate(row, sh))

    async def probe(self, nodes: list[tuple[str, int]]) -> None:
        """Parents that may have become leaves: read them by name."""
        if not nodes:
            return
        replies = await self.svc.run_sharded_items(
            "evict_leaf_info", [(ps, [p]) for p, ps in nodes]
        )
        self.result.candidate_reads += 1
        lost = False
        for (_p, ps), (status, row) in zip(nodes, replies):
            st = _s(status)
            if st == "ok":
                self._add(self._candidate(row, ps))
            elif st in ("lease", "hard", "busy"):
                self.result.skip(st)
            elif st == "gone":
                lost = True
        if lost:
            # A parent was an empty shell and collapsed: the cascade went on above it to a node
            # we cannot name. Read every shard's index from the start again (bounded windows;
            # leaves already known are not added twice).
            for c in self.cursors:
                c.score, c.member, c.exhausted = "", "", False
            self._horizon = None

    def _blocking_shards(self, score: float) -> list[int]:
        """Shards whose unread leaves might score below ``score``."""
        if self._horizon is None:  # the lowest cursor of a shard with unread leaves
            self._horizon = min(
                (c.horizon for c in self.cursors if not c.exhausted), default=float("inf")
            )
        if score <= self._horizon:
            return []
        return [sh for sh, c in enumerate(self.cursors) if not c.exhausted and c.horizon < score]

    # -- choosing ---------------------------------------------------------------------------
    async def pick(self) -> list[Candidate]:
        """Victims of one round, best first, covering what the goal still needs."""
        picked: list[Candidate] = []
        need_bytes, need_objects = self.goal.need()
        got_bytes = got_objects = 0
        limit = self.svc.config.script_batch_size
        refills = 0
        while len(picked) < limit and (got_bytes < need_bytes or got_objects < need_objects):
            if not self.heap:
                blocking = self._blocking_shards(float("inf"))
            else:
                blocking = self._blocking_shards(self.heap[0].score)
            if blocking and refills < MAX_REFILLS_PER_ROUND:
                refills += 1
                await self.refill(blocking)
                continue
            if not self.heap:
                break
            c = heapq.heappop(self.heap)
            picked.append(c)
            got_bytes += c.nbytes
            got_objects += c.objects
        return picked

    # -- evicting ---------------------------------------------------------------------------
    async def evict(self, picked: list[Candidate]) -> None:
        await self.svc.checkpoint("evict:chosen")
        await self.lease.ensure()
        calls = await self.svc.run_sharded(
            "evict_leaves",
            [(c.shard, [c.h]) for c in picked],
            [*self.lease.head(), 1 if self.allow_soft else 0],
        )
        conts: list[Any] = []
        frees: list[tuple[int, str]] = []
        journal: list[tuple[int, str]] = []
        parents: dict[str, int] = {}
        evicted: list[str] = []
        fenced = False
        for idx, reply in calls:
            self.result.batches += 1
            if int(reply[0]) == 0:
                fenced = True
                continue
            _, rows, cs, fs, _now, js = reply
            journal.extend((int(sh), _s(e)) for sh, e in js)
            for i, (status, erased, nkeys, nbytes, parent, pshard) in zip(idx, rows):
                c = picked[i]
                st = _s(status)
                if st != "ok":
                    self.result.skip(st)
                    continue
                keys = [_s(k) for k in erased]
                d = self.depth.get(c.h, 1)
                self.result.cascade_depth = max(self.result.cascade_depth, d)
                self.result.evicted_leaves += 1
                self.result.evicted_objects += len(keys)
                self.result.unregistered_keys += int(nkeys) - len(keys)
                self.result.evicted_keys.extend(keys)
                self.result.bytes += int(nbytes)
                if c.soft:
                    self.result.soft_pinned_objects += len(keys)
                evicted.append(c.h)
                p = _s(parent)
                if p:
                    self.depth[p] = max(self.depth.get(p, 0), d + 1)
                    parents[p] = int(_s(pshard))
            conts.extend(cs)
            frees.extend((int(sh), _s(e)) for sh, e in fs)
        self.result.round_leaves.append(evicted)
        await self.svc.checkpoint("evict:evicted")
        await self.svc.finish_unlinks(conts)
        await self.svc.ack_unlinks(journal)
        await self.svc.apply_frees(frees)
        if fenced:
            self.svc.eviction_metrics.fenced += 1
            raise LeaseLost("an eviction script was fenced: a newer evictor epoch exists")
        # A parent can only be a leaf again once its edge is gone (same shard: already;
        # other shard: after finish_unlinks above).
        self.known.difference_update(parents)
        await self.probe(list(parents.items()))

    async def run(self, fallback: bool = True) -> None:
        """Rounds until the goal is met or nothing evictable is left: leaves by score, then
        (fallback) objects that belong to no tree by Mooncake's BatchEvict, then soft-pinned
        leaves as the last resort."""
        await self.refill(list(range(len(self.cursors))))
        phase = "leaves"
        while not self.goal.satisfied():
            picked = await self.pick()
            if not picked:
                unread = [sh for sh, c in enumerate(self.cursors) if not c.exhausted]
                if unread:  # windows full of skipped leaves: read on (cursors only advance)
                    await self.refill(unread)
                    continue
                if phase == "leaves":
                    phase = "fallback"
                    if fallback:
                        await self._fallback()
                    continue
                if phase == "fallback" and self.svc.config.allow_evict_soft_pinned_objects:
                    phase = "soft"
                    self.allow_soft = True
                    for c in self.soft:
                        heapq.heappush(self.heap, c)
                    self.soft.clear()
                    continue
                break
            self.result.rounds += 1
            await self.evict(picked)
            await self.goal.refresh()

    async def _fallback(self) -> None:
        """RFC: when the leaves do not suffice, BatchEvict continues, over objects of no tree,
        run after run (as Mooncake's eviction thread would) while the goal is not met and a run
        evicts something."""
        if self.goal.max_objects is not None:
            return
        cfg = self.svc.config
        while not self.goal.satisfied():
            target, lower = ratios(
                self.goal.used, cfg.eviction_high_watermark_ratio, cfg.eviction_ratio
            )
            be = BatchEvictor(
                self.svc, self.lease, self.result, no_tree=True, scan_budget=4 * cfg.num_shards
            )
            try:
                done = await be.run(target, lower)
            finally:
                await self.goal.refresh()
            if done == 0:
                return


__all__ = ["Candidate", "LeaseLost", "RadixEvictor"]
