"""Mooncake's traditional BatchEvict, faithfully: ratios are fractions of the OBJECT COUNT.

    target     = max(eviction_ratio, used - high_watermark + eviction_ratio)
    lowerbound = max(target * 0.5, used - high_watermark)

Pass 1 walks the shards from a random one; in each it evicts up to
``ceil(object_count_so_far * target) - evicted_so_far`` of the eligible objects (lease expired,
every replica COMPLETE, not hard pinned; soft-pinned ones are kept for pass 2) with the oldest
leases, and every object whose lease ties the threshold lease (Mooncake's nth_element cut).
Pass 2 tops up to ``ceil(object_count * lowerbound)`` from the leftovers, oldest lease first
across all shards, soft-pinned ones only when the not-pinned ones do not suffice and
``allow_evict_soft_pinned_objects``; hard-pinned objects never.

Mooncake scans every object of a shard under its lock; here each shard's lru index (complete,
not hard-pinned objects by lease) is read in lease order from a cursor, in bounded script calls,
and the objects chosen are evicted by a fenced script that re-checks each one. Pass 2's global
order is a k-way merge of per-shard windows (a shard's next window is read before anything
behind it is chosen), which picks the same objects as Mooncake's threshold up to ties.

With ``no_tree`` (the radix mode's fallback, RFC section 3) objects registered in the radix
index are skipped: the tree is only ever evicted leaf first.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Any

from .. import lua_calls as lua
from .coordinator import EvictorLease, LeaseLost
from .goal import EvictionDeps
from .metrics import EvictionResult

INF = "+inf"


def ratios(used: float, high_watermark: float, eviction_ratio: float) -> tuple[float, float]:
    """Mooncake's (target, lowerbound) for a used ratio."""
    target = max(eviction_ratio, used - high_watermark + eviction_ratio)
    lowerbound = max(target * 0.5, used - high_watermark)
    return target, lowerbound


@dataclass
class _Entry:
    key: str
    lease: int
    soft: bool
    nbytes: int
    shard: int


@dataclass
class _Cursor:
    score: str = ""
    member: str = ""
    exhausted: bool = False


@dataclass
class BatchEvictor:
    deps: EvictionDeps
    lease: EvictorLease
    result: EvictionResult
    no_tree: bool = False
    scan_budget: int | None = None  # max scan calls (the radix fallback bounds its cost)
    scans: int = 0
    evicted: int = 0
    object_count: int = 0
    _fenced: bool = field(default=False, repr=False)

    # -- script steps -------------------------------------------------------------------------
    def _budget_left(self) -> bool:
        return self.scan_budget is None or self.scans < self.scan_budget

    async def _scan(
        self, shards: list[int], cursors: dict[int, _Cursor], want: int, max_lease: str, limit: int
    ) -> dict[int, list[_Entry]]:
        """Reads the next eligible entries of each shard (one call per node); moves cursors."""
        out: dict[int, list[_Entry]] = {sh: [] for sh in shards}
        ncalls, windows = await lua.evict_objects_scan(
            self.deps.ctx,
            [(sh, cursors[sh].score, cursors[sh].member) for sh in shards],
            want=want,
            max_lease=max_lease,
            limit=limit,
            no_tree=self.no_tree,
        )
        self.scans += ncalls
        self.result.candidate_reads += ncalls
        for w in windows:
            c = cursors[w.shard]
            c.score, c.member, c.exhausted = w.score, w.member, w.exhausted
            for reason, n in w.skipped.items():
                self.result.skip(reason, n)
            out[w.shard].extend(
                _Entry(r.key, r.lease_ms, r.soft, r.nbytes, w.shard) for r in w.rows
            )
        return out

    async def _evict(self, entries: list[_Entry], allow_soft: bool) -> int:
        """Fenced erase of chosen objects, then unlinks and frees. Returns objects evicted."""
        if not entries:
            return 0
        await self.deps.ctx.checkpoint("evict:chosen")
        await self.lease.ensure()
        calls = await lua.evict_keys(
            self.deps.ctx,
            self.lease.head(),
            [(e.shard, e.key) for e in entries],
            allow_soft=allow_soft,
            no_tree=self.no_tree,
        )
        done = 0
        conts: list[Any] = []
        frees: list[tuple[int, str]] = []
        fenced = False
        for call in calls:
            self.result.batches += 1
            if call.fenced:
                fenced = True
                continue
            for i, (st, nbytes) in call.rows:
                if st == "ok":
                    e = entries[i]
                    done += 1
                    self.result.evicted_keys.append(e.key)
                    self.result.bytes += nbytes
                    if e.soft:
                        self.result.soft_pinned_objects += 1
                else:
                    self.result.skip(st if st in self.result.skipped else "gone")
            conts.extend(call.continuations)
            frees.extend(call.frees)
        await self.deps.radix.finish_unlinks(conts)
        await self.deps.allocator.apply_frees(frees)
        self.result.evicted_objects += done
        if self.no_tree:
            self.result.fallback_objects += done
        self.evicted += done
        if fenced:
            self.deps.ctx.metrics.fenced += 1
            raise LeaseLost("an eviction script was fenced: a newer evictor epoch exists")
        return done

    async def _counts(self) -> dict[int, int]:
        return await lua.evict_counts(self.deps.ctx)

    # -- the algorithm -----------------------------------------------------------------------
    async def run(self, target: float, lowerbound: float) -> int:
        """One BatchEvict(target, lowerbound). Returns the objects evicted."""
        cfg = self.deps.ctx.config
        n = cfg.num_shards
        batch = cfg.script_batch_size
        counts = await self._counts()
        start = random.randrange(n)
        order = [(start + i) % n for i in range(n)]
        # Pass 1: per shard, the oldest not-soft-pinned eligible objects (+ threshold ties).
        self.result.rounds += 1
        for sh in order:
            self.object_count += counts.get(sh, 0)
            ideal = math.ceil(self.object_count * target) - self.evicted
            if ideal <= 0 or not self._budget_left():
                continue
            cur = _Cursor()
            chosen: list[_Entry] = []
            while len(chosen) < ideal and not cur.exhausted and self._budget_left():
                want = ideal - len(chosen)
                got = (await self._scan([sh], {sh: cur}, want, INF, min(batch, want + 16)))[sh]
                chosen.extend(e for e in got if not e.soft)
                if not got and cur.exhausted:
                    break
            if len(chosen) >= ideal:
                chosen = chosen[:ideal]
                threshold = chosen[-1].lease
                # Ties of the threshold lease go too (Mooncake: lease <= nth smallest lease).
                while not cur.exhausted and self._budget_left():
                    got = (await self._scan([sh], {sh: cur}, 0, str(threshold), batch))[sh]
                    if not got:
                        break
                    chosen.extend(e for e in got if not e.soft and e.lease <= threshold)
            for i in range(0, len(chosen), batch):
                await self._evict(chosen[i : i + batch], allow_soft=False)
        # Pass 2: top up to the lower bound, oldest lease first across shards.
        want = math.ceil(self.object_count * lowerbound) - self.evicted
        if want <= 0 or not self._budget_left():
            return self.evicted
        self.result.rounds += 1
        nonsoft, soft = await self._merge_oldest(want)
        allow_soft = cfg.allow_evict_soft_pinned_objects
        if len(nonsoft) >= want or not allow_soft:
            victims = nonsoft[:want]
        else:
            soft.sort(key=lambda e: e.lease)
            victims = nonsoft + soft[: want - len(nonsoft)]
        for i in range(0, len(victims), batch):
            await self._evict(victims[i : i + batch], allow_soft=allow_soft)
        return self.evicted

    async def _merge_oldest(self, want: int) -> tuple[list[_Entry], list[_Entry]]:
        """The ``want`` oldest not-soft-pinned eligible objects across all shards, in lease
        order; and, when there are fewer, every soft-pinned one seen (all of them)."""
        n = self.deps.ctx.config.num_shards
        k = max(8, min(self.deps.ctx.config.script_batch_size, 2 * math.ceil(want / n) + 4))
        cursors = {sh: _Cursor() for sh in range(n)}
        heap: list[tuple[int, int, int, _Entry]] = []
        pending = dict.fromkeys(range(n), 0)
        seq = 0

        async def fill(shards: list[int]) -> None:
            nonlocal seq
            got = await self._scan(shards, cursors, 0, INF, k)
            for sh, entries in got.items():
                for e in entries:
                    seq += 1
                    heapq.heappush(heap, (e.lease, sh, seq, e))
                    pending[sh] += 1

        await fill(list(range(n)))
        nonsoft: list[_Entry] = []
        soft: list[_Entry] = []
        while heap and len(nonsoft) < want:
            # Every shard with nothing in the heap and more to read is read first: the next
            # entry of the merge may be there.
            starved = [sh for sh in range(n) if pending[sh] == 0 and not cursors[sh].exhausted]
            if starved and self._budget_left():
                await fill(starved)
                # a shard that returned nothing but is not exhausted only skipped ineligible
                # entries; it is read again on the next turn (bounded by the scan budget)
                continue
            _, sh, _, e = heapq.heappop(heap)
            pending[sh] -= 1
            (soft if e.soft else nonsoft).append(e)
        if len(nonsoft) < want:
            # Fewer not-pinned than wanted: every eligible object has to be known.
            while self._budget_left():
                more = [sh for sh in range(n) if not cursors[sh].exhausted]
                if not more:
                    break
                await fill(more)
            while heap:
                _, sh, _, e = heapq.heappop(heap)
                (soft if e.soft else nonsoft).append(e)
        return nonsoft, soft
