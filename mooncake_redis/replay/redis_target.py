"""Our own store as a replay target: the in-process library (``workers == 0``).

The radix policy is ``enable_radix_tree`` (leaf-first eviction, the put guard) with the chosen
scoring; batch-evict is the same store with the index off (Mooncake's BatchEvict). As the
Mooncake master's 10 ms eviction thread would, the target runs one eviction pass after a put
that found no room or left the used ratio above the high watermark.
"""

from __future__ import annotations

import uuid

from ..errors import ErrorCode, MooncakeError
from ..eviction.coordinator import LeaseLost
from ..eviction.policy import get_policy
from ..models import ReplicateConfig, Segment
from ..service import MasterService
from .store_config import CLIENT, store_config
from .target import PutItem, ReplayTarget, TargetOptions


def check_scoring(scoring: str) -> None:
    """Refuse a scoring the store does not have before anything is replayed (the policy
    study's candidates exist only in the reference model)."""
    try:
        get_policy(scoring)
    except MooncakeError as exc:
        raise ValueError(
            f"{exc.message}; the other candidates of the policy study run on --target model"
        ) from exc


class RedisTarget:
    def __init__(self, svc: MasterService, options: TargetOptions, own_namespace: bool) -> None:
        self.svc = svc
        self.options = options
        self.name = f"mooncake-redis ({options.policy}"
        self.name += f", {options.scoring})" if options.policy == "radix" else ")"
        self.value_size = options.value_size
        self._own_namespace = own_namespace
        self._high_watermark = svc.config.eviction_high_watermark_ratio

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        return [r is True for r in await self.svc.batch_exist_key(keys)]

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        keys = [it.key for it in items]
        res = await self.svc.batch_put_start(
            CLIENT,
            keys,
            [[it.size] for it in items],
            [ReplicateConfig(parent_block_hash=it.parent_block_hash) for it in items],
        )
        ok = [not isinstance(r, MooncakeError) for r in res]
        ends = await self.svc.batch_put_end(CLIENT, [k for k, good in zip(keys, ok) if good])
        if any(e is not None for e in ends):  # pragma: no cover - would be a store bug
            raise next(e for e in ends if e is not None)
        no_room = any(
            isinstance(r, MooncakeError) and r.code == ErrorCode.NO_AVAILABLE_HANDLE for r in res
        )
        await self._maybe_evict(no_room)
        return ok

    async def _maybe_evict(self, no_room: bool) -> None:
        # One cheap read of the used ratio decides, and the pass starts from it.
        usage = None
        if not no_room:
            usage = await self.svc.usage()
            if usage.ratio <= self._high_watermark:
                return
        # As the master's eviction thread (and our coordinator), the replay keeps the evictor
        # lease between passes: no acquire, fence and release per pass; renewed when half of
        # its ttl is gone, and read afresh after a put found no room (the durable flag).
        eviction = self.svc.eviction
        lease = eviction.lease
        renew = no_room or lease.remaining_s() < lease.ttl_ms / 2000.0
        if renew and not await lease.acquire():  # another evictor holds it: wait as before
            await self.svc.evict_once()
            return
        try:
            await eviction.run_eviction_pass(lease, usage=usage)
        except LeaseLost:
            await self.svc.evict_once()

    async def batch_get(self, keys: list[str]) -> list[bool]:
        return [
            not isinstance(r, MooncakeError) for r in await self.svc.batch_get_replica_list(keys)
        ]

    async def stored_keys(self) -> set[str]:
        return await self.svc.complete_keys()

    async def counters(self) -> dict[str, int]:
        m = self.svc.eviction_metrics
        return {
            "evictions": m.successful_passes,
            "evicted_keys": m.evicted_keys,
            "bytes_evicted": m.evicted_bytes,
            "removed": 0,
        }

    async def close(self) -> None:
        await self.svc.eviction.lease.release()
        if self._own_namespace and not self.svc.backend.fake:
            from ..bench.common import drop_namespace

            await drop_namespace(self.svc)
        await self.svc.aclose()


async def create_target(options: TargetOptions) -> ReplayTarget:
    """Registry factory: the in-process library, or N worker processes (``workers > 0``)."""
    if options.policy == "radix":
        check_scoring(options.scoring)
    if options.workers > 0:
        from .worker_target import create_worker_target

        return await create_worker_target(options)
    url = options.redis_url or f"fakeredis://replay-{uuid.uuid4().hex}"
    config = store_config(options, url)
    svc = await MasterService.from_url(url, config)
    await svc.mount_segment(
        Segment("replay-seg-0", "replay-seg-0", 1 << 40, options.capacity_bytes), CLIENT
    )
    return RedisTarget(svc, options, own_namespace="namespace" not in options.extra)
