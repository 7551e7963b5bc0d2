"""Buffers in segments: reserve (distinct segments, node by node), free, apply outbox frees.

Every put reads the segment registry, so the copy a worker caches lives here; every segment-tag
script goes through the context's ``run_segment_groups`` (one call per node: a cluster cannot
cross slots).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import lua_calls as lua
from .context import Context
from .errors import MooncakeError
from .keys import HASH_FIELDS, KeySchema
from .models import ReplicateConfig
from .records import AllocRecord, FreePair, _s, bucket_records, parse_entry, u64hex

SEGMENT_CACHE_S = 0.5  # how long a worker trusts its copy of the segment registry


@dataclass
class PutItem:
    """One key of a put batch, from its check to its commit (the upsert path reuses it)."""

    index: int
    key: str
    size: int
    prefix: str
    shard: int
    pid: str
    cfg: ReplicateConfig
    pshard: int = -1  # the parent block's shard (-1: no parent)
    reps: list[dict[str, Any]] = field(default_factory=list)
    gen: int = 0
    maxsize: int = 0  # largest mounted segment seen while reserving
    adopted: bool = False  # failed, but its node already names the parent: keep the edge
    parent_stored: bool = False  # the parent block was completely stored when linked


async def segment_records(
    backend: Any, keys: KeySchema, segment_id: str, count: int = 128
) -> AsyncIterator[dict[int, AllocRecord]]:
    """A segment's allocation records, a page (about ``count`` record buckets) at a time:
    ZSCAN of its bucket index, then each bucket (lua/includes/alloc.lua). Every record present
    for the whole walk is returned (a bucket may be returned twice). ``backend``: a Backend."""
    anchor = keys.segment_anchor(segment_id)
    shift = await backend.command("HGET", anchor, HASH_FIELDS["info"]["bucket_shift"])
    if not shift:
        return
    ak = int(shift)
    index = keys.segment_key(segment_id, "alloc_index")
    cursor: Any = 0
    while True:
        cursor, members = await backend.command("ZSCAN", index, cursor, "COUNT", count)
        buckets = [_s(b) for b, _score in members]
        page: dict[int, AllocRecord] = {}
        if buckets:  # the page's buckets in one round trip (one slot: the segment's tag)
            pipe = backend.pipeline()
            for bucket in buckets:
                pipe.hgetall(keys.alloc_bucket(segment_id, bucket))
            for bucket, raw in zip(buckets, await backend.execute(pipe, "allocation buckets")):
                page.update(bucket_records(bucket, ak, raw))
        yield page
        if int(cursor) == 0:
            break


class Allocator:
    """The segment allocators as the puts, unmounts, janitor and evictors use them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._seg_cache: list[str] | None = None
        self._seg_cache_at = 0.0

    async def segment_ids(self, refresh: bool = False) -> list[str]:
        now = time.monotonic()
        if refresh or self._seg_cache is None or now - self._seg_cache_at > SEGMENT_CACHE_S:
            raw = await self.ctx.backend.command("HKEYS", self.ctx.keys.global_key("segments"))
            self._seg_cache = sorted(_s(x) for x in raw)
            self._seg_cache_at = now
        return list(self._seg_cache)

    def segments_changed(self) -> None:
        self._seg_cache = None

    def note_segment_ids(self, ids: Sequence[str]) -> None:
        """The registry's ids as a caller has just read them (sorted): the cache's refresh."""
        self._seg_cache = list(ids)
        self._seg_cache_at = time.monotonic()

    async def reserve(self, puts: Sequence[PutItem], retried: bool = False) -> None:
        """Allocates up to replica_num buffers per put, on distinct segments."""
        if not puts:
            return
        seg_ids = await self.segment_ids()
        if seg_ids:
            anchors = [self.ctx.keys.segment_anchor(s) for s in seg_ids]
            groups = self.ctx.backend.group(anchors)
            if len(groups) == 1:  # one Redis node: one step, every put on its only node
                need = [p for p in puts if len(p.reps) < p.cfg.replica_num]
                if need:
                    node, idx = groups[0]
                    await self._reserve_on(node, [seg_ids[j] for j in idx], need)
            else:
                await self._reserve_nodes(puts, seg_ids, groups)
        # Maybe this worker's copy of the registry is stale (another worker mounted a segment
        # since, however recently this copy was read): read it again, and try once more if it
        # changed, so a fresh mount never looks like "no space" (which would also raise the
        # eviction flag).
        if (
            not retried
            and any(not p.reps for p in puts)
            and await self.segment_ids(refresh=True) != seg_ids
        ):
            await self.reserve([p for p in puts if not p.reps], retried=True)

    async def _reserve_nodes(
        self, puts: Sequence[PutItem], seg_ids: list[str], groups: list[tuple[Any, list[int]]]
    ) -> None:
        """:meth:`reserve` over several Redis nodes: node by node in each put's order, one call
        per node per step, nodes in parallel."""
        node_of_seg: dict[str, int] = {}
        for gi, (_, idx) in enumerate(groups):
            for j in idx:
                node_of_seg[seg_ids[j]] = gi
        # Per put: its node order (preferred segments' nodes first, then a rotation from a
        # random start: one random number per batch, the put's index added).
        plans: list[list[int]] = []
        ng = len(groups)
        rotations = [[(r + k) % ng for k in range(ng)] for r in range(ng)]
        r0 = random.randrange(ng)
        for n, p in enumerate(puts):
            rotation = rotations[(r0 + n) % ng]
            preferred = p.cfg.preferred()
            if not preferred:
                plans.append(rotation)
                continue
            order: list[int] = []
            for s in preferred:
                gi = node_of_seg.get(s, -1)
                if gi >= 0 and gi not in order:
                    order.append(gi)
            plans.append(order + [gi for gi in rotation if gi not in order])
        step = 0
        while True:
            calls: dict[int, list[int]] = {}
            for n, p in enumerate(puts):
                if len(p.reps) < p.cfg.replica_num and step < len(plans[n]):
                    calls.setdefault(plans[n][step], []).append(n)
            if not calls:
                break
            await asyncio.gather(
                *(
                    self._reserve_on(
                        groups[gi][0],
                        [seg_ids[j] for j in groups[gi][1]],
                        [puts[n] for n in ns],
                    )
                    for gi, ns in calls.items()
                )
            )
            step += 1

    async def _reserve_on(self, node: Any, seg_ids: list[str], puts: list[PutItem]) -> None:
        pos = {s: i + 1 for i, s in enumerate(seg_ids)}
        r0, m = random.randrange(len(seg_ids)), len(seg_ids)
        none: list[int] = []  # no preferred segment (never changed)
        new = tuple.__new__
        lens: dict[int, str] = {}  # size -> u64 hex, once per distinct size of the batch
        for start in range(0, len(puts), self.ctx.config.script_batch_size):
            part = puts[start : start + self.ctx.config.script_batch_size]
            asks = [
                new(  # lua.ReserveAsk(...) without its Python __new__ (one per put)
                    lua.ReserveAsk,
                    (
                        p.key,
                        p.pid,
                        p.size,
                        p.cfg.replica_num - len(p.reps),
                        (r0 + start + n) % m,  # spread over the segments, one random draw
                        [pos[s] for s in p.cfg.preferred() if s in pos]
                        if p.cfg.preferred_segment or p.cfg.preferred_segments
                        else none,
                    ),
                )
                for n, p in enumerate(part)
            ]
            got = await lua.alloc_reserve(self.ctx, node, seg_ids, asks)
            now, maxsize = got.now_ms, got.max_size
            for p, grants in zip(part, got.grants):
                length = lens.get(p.size)
                if length is None:
                    length = lens[p.size] = u64hex(p.size)
                for g in grants:
                    p.reps.append(
                        {  # u64 values as hex strings: cjson must never see them as numbers
                            "seg": g.segment_id,
                            "off": g.offset,
                            "len": length,
                            "base": g.base,
                            "ep": g.te_endpoint,
                            "proto": g.protocol,
                            "name": g.name,
                            "ms": now,
                        }
                    )
                if maxsize > p.maxsize:
                    p.maxsize = maxsize

    async def free_reservations(self, puts: Sequence[PutItem]) -> None:
        by_seg: dict[str, list[tuple[str, str]]] = {}
        for p in puts:
            for r in p.reps:
                by_seg.setdefault(r["seg"], []).append((r["off"], p.pid))
        await lua.alloc_free(self.ctx, by_seg)

    async def apply_frees(self, frees: Sequence[FreePair]) -> int:
        """Applies outbox entries to the allocators, then acknowledges them. Idempotent. On a
        single Redis (and within one call's bounds) both in one atomic call."""
        if not frees:
            return 0
        by_seg: dict[str, list[tuple[str, str]]] = {}
        for _, entry in frees:
            seg, off, pid = parse_entry(entry)
            by_seg.setdefault(seg, []).append((u64hex(off), pid))
        valid = {}
        for seg, pairs in by_seg.items():
            try:
                self.ctx.keys.segment_anchor(seg)
            except MooncakeError:
                continue
            valid[seg] = pairs
        limit = self.ctx.config.script_batch_size
        if not self.ctx.backend.cluster and len(frees) <= limit and len(valid) <= limit:
            await lua.outbox_apply(self.ctx, valid, frees)
            await self.ctx.checkpoint("drain:freed")
        else:
            await lua.alloc_free(self.ctx, valid)
            await self.ctx.checkpoint("drain:freed")
            await lua.outbox_ack(self.ctx, frees)
        return len(frees)
