"""The eviction part: one pass on demand (``evict_once``) or from the coordinator's loop.

Built over the radix index, the allocators, the segments (the used ratio) and the janitor
(which the coordinator runs under the same lease); the evictors get only
:class:`~.goal.EvictionDeps`.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from .. import lua_calls as lua
from ..allocation import Allocator
from ..context import Context
from ..janitor import Janitor
from ..radix import RadixIndex
from ..segments import Segments, Usage
from .batch_evict import BatchEvictor, ratios
from .coordinator import EvictionCoordinator, EvictorLease, LeaseLost
from .goal import EvictionDeps, Goal
from .metrics import EvictionResult
from .orphans import OrphanEvictor
from .policy import LeafPolicy, get_policy
from .radix_evict import RadixEvictor


class Eviction:
    """Eviction for MasterService: radix-aware leaf-first eviction when ``enable_radix_tree``,
    Mooncake's BatchEvict otherwise, one evictor at a time (lease with a fencing epoch)."""

    def __init__(
        self,
        ctx: Context,
        radix: RadixIndex,
        allocator: Allocator,
        segments: Segments,
        janitor: Janitor,
    ) -> None:
        self.ctx = ctx
        self.radix = radix
        self.segments = segments
        self.janitor = janitor
        self.deps = EvictionDeps(ctx, radix, allocator)
        self.lease = EvictorLease(ctx)  # this service's lease handle (one holder id)
        self._coordinator: EvictionCoordinator | None = None
        self._lock = asyncio.Lock()
        self._on_demand = 0  # evict_once calls in progress (the lease is released after the last)
        self._no_maxmemory_until = 0.0
        self._eager_at = 0.0

    def coordinator(
        self, *, check_interval_ms: int = 20, janitor: bool = True
    ) -> EvictionCoordinator:
        """The background evictor/janitor loop (``start()`` / ``await stop()``), built once."""
        if self._coordinator is None:
            self._coordinator = EvictionCoordinator(
                self.ctx,
                self.lease,
                self.janitor,
                self.run_eviction_pass,
                check_interval_ms=check_interval_ms,
                janitor=janitor,
            )
        return self._coordinator

    @property
    def policy(self) -> LeafPolicy:
        return get_policy(self.ctx.config.eviction_policy, self.ctx.config)

    # -- unfinished cascades of an evictor that died ----------------------------------------
    async def resume_unlinks(self) -> int:
        """Runs the journaled unlink steps left by an evictor that died between evicting a leaf
        and unlinking it from its parent in another shard (idempotent). Returns steps run."""
        total = 0
        for _ in range(64):
            journal = await lua.evict_unlinks_peek(self.ctx)
            if not journal:
                break
            conts: list[Any] = [json.loads(e) for _, e in journal]
            await self.radix.finish_unlinks(conts)
            await lua.evict_unlinks_ack(self.ctx, journal)
            total += len(journal)
        return total

    # -- the used ratio -----------------------------------------------------------------------
    async def usage(self, segment_ids: Sequence[str] | None = None) -> Usage:
        return await self.segments.usage(segment_ids)

    async def redis_memory_ratio(self) -> float:
        """Redis's used_memory / maxmemory on its fullest node (0 without a maxmemory): Redis
        fills up with metadata long before small objects fill large segments, and a full Redis
        refuses every put, so eviction must count it too."""
        if time.monotonic() < self._no_maxmemory_until:
            return 0.0
        try:
            infos = await self.ctx.backend.info("memory")
        except Exception:  # fakeredis, or Redis unreachable: the segment ratio decides
            infos = []
        ratio = 0.0
        for info in infos:
            limit = int(info.get("maxmemory", 0) or 0)
            if limit > 0:
                ratio = max(ratio, int(info.get("used_memory", 0)) / limit)
        if ratio == 0.0:
            self._no_maxmemory_until = time.monotonic() + 5.0
        return ratio

    # -- on demand ----------------------------------------------------------------------------
    async def evict_once(
        self,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        wait: bool = True,
    ) -> EvictionResult:
        """One full eviction pass now, as the evictor would run it; returns what it evicted.

        Runs when the used ratio exceeds ``eviction_high_watermark_ratio`` (radix: down to
        it, or to it minus ``eviction_ratio``, per ``radix_eviction_target``) or an allocation
        failed (the durable flag), or always with ``force`` (then as after a failed
        allocation: down to the watermark minus ``eviction_ratio``, freeing at least
        ``eviction_ratio`` of the capacity). ``max_objects``: evict that many objects (whole
        leaves, so possibly a few more) regardless of the watermark (benchmarks). ``target_
        ratio``: stop at that used ratio instead. Takes the evictor lease first (waiting up to
        one lease ttl when ``wait``); when another live evictor holds it, nothing is evicted
        and ``reason`` is "lease_held"."""
        lease = self.lease
        deadline = time.monotonic() + (lease.ttl_ms / 1000.0 + 0.5 if wait else 0.0)
        while not await lease.acquire():
            if time.monotonic() >= deadline:
                st = await lease.read()
                return EvictionResult(reason="lease_held", holder=st.holder, epoch=st.epoch)
            await asyncio.sleep(min(0.05, lease.ttl_ms / 10000.0))
        self._on_demand += 1
        try:
            return await self.run_eviction_pass(
                lease, force=force, max_objects=max_objects, target_ratio=target_ratio
            )
        finally:
            self._on_demand -= 1
            coordinated = self._coordinator is not None and self._coordinator.running
            if not coordinated and self._on_demand == 0:
                await lease.release()

    async def run_eviction_pass(
        self,
        lease: EvictorLease,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        usage: Usage | None = None,
    ) -> EvictionResult:
        """One pass under ``lease`` (already acquired). Raises LeaseLost when fenced.
        ``usage``: the used ratio as the caller has just read it (not read again, nor what it
        says eviction left pending)."""
        async with self._lock:
            return await self._pass(lease, force, max_objects, target_ratio, usage)

    async def _pass(
        self,
        lease: EvictorLease,
        force: bool,
        max_objects: int | None,
        target_ratio: float | None,
        usage: Usage | None = None,
    ) -> EvictionResult:
        cfg = self.ctx.config
        t0 = time.perf_counter()
        flag = lease.flag
        if usage is None:
            usage = await self.usage()
        hw, er = cfg.eviction_high_watermark_ratio, cfg.eviction_ratio
        # Redis itself nearly full (or a write refused for memory: the 'oom:' flag) evicts a
        # fraction of the objects by count, as Mooncake's ratios do: bytes say nothing there.
        # (INFO memory is read only when nothing else already decided the pass)
        pressured = max_objects is not None or force or usage.ratio > hw
        redis_full = not pressured and (
            flag.startswith("oom:") or await self.redis_memory_ratio() > hw
        )
        pending: lua.Pending | None = None  # None: not counted (orphans looked for)
        if pressured or (flag and er > 0) or redis_full:
            # What a previous evictor left half done: cascades, then frees (the used ratio),
            # each only where the one count of all three (with the orphans) is not 0.
            await lease.ensure()
            # The used ratio's read on a single Redis counted them already (one call fewer).
            pending = usage.pending
            if pending is None:
                pending = await lua.evict_pending(self.ctx)
            done = 0
            if pending.unlinks:
                done += await self.resume_unlinks()
            if pending.outbox:
                done += await self.janitor.drain_outboxes()
            if done:
                usage = await self.usage()
            if pending.unlinks or pending.outbox:
                pending = None  # a cascade or a free may have orphaned a subtree since
        result = EvictionResult(epoch=lease.epoch, used_before=usage.ratio)
        if max_objects is not None:
            result.reason = "max_objects"
        elif force:
            result.reason = "forced"
        elif usage.ratio > hw:
            result.reason = "watermark"
        elif redis_full:
            result.reason = "redis_memory"
            total = await self._object_count()
            max_objects = max(1, math.ceil(max(er, 0.01) * total)) if total else 0
        elif flag and er > 0:
            result.reason = "alloc_failed"
        elif self._eager_orphans_due():
            # orphan_eviction = "eager": orphaned subtrees go with their parent block, at the
            # next janitor interval, whatever the pressure.
            await lease.ensure()
            result.reason = "orphans"
            result.mode = "radix"
            await OrphanEvictor(self.deps, lease, result, None).run()
            result.used_after = (await self.usage()).ratio
            result.seconds = time.perf_counter() - t0
            self.ctx.metrics.record(result)
            return result
        else:
            result.reason = "idle"
            result.used_after = usage.ratio
            return result
        try:
            if cfg.enable_radix_tree:
                policy = self.policy
                result.mode, result.policy = "radix", policy.describe()
                making_room = result.reason in ("forced", "alloc_failed")
                min_free = int(er * usage.capacity) if making_room else 0
                if target_ratio is None:
                    rfc = cfg.radix_eviction_target == "watermark" and not making_room
                    target_ratio = hw if rfc else max(0.0, hw - er)
                clocks = bool(policy.tier_offsets())
                goal = Goal(self.usage, result, usage, target_ratio, min_free, max_objects, clocks)
                # Orphaned subtrees can never be a prefix hit: they go before any leaf.
                if pending is None or pending.orphans:
                    await OrphanEvictor(self.deps, lease, result, goal).run()
                if not goal.satisfied():
                    await RadixEvictor(self.deps, lease, policy, result, goal).run()
                # Unless the eviction call that met the goal published them (and nothing since).
                if goal.publish_clocks and goal.published != result.evicted_leaves:
                    unpublished = result.evicted_leaves - (goal.published or 0)
                    await self._publish_clocks(lease, unpublished)
                result.used_after = goal.used
            else:
                result.mode, result.policy = "batch", "batch-evict"
                await self._batch_pass(lease, result, usage, max_objects, target_ratio)
                result.used_after = (await self.usage()).ratio
            if flag and (result.evicted_objects > 0 or await self._no_objects()):
                await lease.clear_flag(flag)
        except LeaseLost:
            result.seconds = time.perf_counter() - t0
            self.ctx.metrics.record(result)
            raise
        result.seconds = time.perf_counter() - t0
        self.ctx.metrics.record(result)
        return result

    async def record_policy(self) -> int:
        """At start: the leaf policy's tier protections into every shard (the radix include
        scores the leaves index with them); a shard whose scoring changed is rescored."""
        if not self.ctx.config.enable_radix_tree:
            return 0
        return await lua.radix_policy(self.ctx, self.policy.tier_offsets())

    async def _publish_clocks(self, lease: EvictorLease, evicted: int) -> None:
        """After a pass, tiered: the turnover (blocks stored now) and the logical clock
        (raised by the leaves this pass evicted), read by puts and hits until the next pass."""
        await self.ctx.checkpoint("evict:publish")
        await lease.ensure()
        cfg = self.ctx.config
        turnover: int | None = None  # None: summed by the one call that covers every shard
        if self.ctx.backend.cluster or cfg.num_shards > cfg.script_batch_size:
            turnover = (await self.ctx.shard_totals("nodes"))["nodes"]
        if not await lua.evict_publish(self.ctx, lease.head(), turnover, evicted):
            lease.lost()

    def _eager_orphans_due(self) -> bool:
        if not self.ctx.config.enable_radix_tree or self.ctx.config.orphan_eviction != "eager":
            return False
        now = time.monotonic()
        if now - self._eager_at < self.ctx.config.janitor_interval_ms / 1000.0:
            return False
        self._eager_at = now
        return True

    async def _batch_pass(
        self,
        lease: EvictorLease,
        result: EvictionResult,
        usage: Usage,
        max_objects: int | None,
        target_ratio: float | None,
    ) -> None:
        cfg = self.ctx.config
        if max_objects is not None or target_ratio is not None:
            # Not Mooncake's trigger, but the same algorithm: ratios of the object count that
            # give the wanted number of objects (max_objects) or the wanted used ratio.
            total = await self._object_count()
            if max_objects is not None:
                frac = min(1.0, max_objects / total) if total else 0.0
            else:
                frac = max(0.0, usage.ratio - (target_ratio or 0.0))
            target = lower = frac
        else:
            target, lower = ratios(
                usage.ratio, cfg.eviction_high_watermark_ratio, cfg.eviction_ratio
            )
        await BatchEvictor(self.deps, lease, result).run(target, lower)

    async def _object_count(self) -> int:
        return sum((await lua.evict_counts(self.ctx)).values())

    async def _no_objects(self) -> bool:
        return await self._object_count() == 0
