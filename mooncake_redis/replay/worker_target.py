"""Our store driven through N worker processes over HTTP (``replay --workers N``).

The workers are ``mooncake-redis serve`` processes on loopback against one Redis (with no Redis
URL, the embedded store served over TCP so that they can share it). Calls go round-robin, one
worker per call, through :class:`~mooncake_redis.client.AsyncMasterClient`; the workers run the
shared eviction coordinator themselves (one leader through the evictor lease, a check every
20 ms, as Mooncake's eviction thread), so nothing is evicted from the replay's side. The
engine pings as a Mooncake client does, so the janitor keeps its segment mounted. Stored keys
and eviction counts are read from Redis and from the workers' /metrics, never granting leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import httpx

from ..backend import EmbeddedTcpServer
from ..client import AsyncMasterClient
from ..config import Config
from ..errors import MooncakeError
from ..server.fleet import WorkerFleet
from ..service import MasterService
from .store_config import CLIENT, eviction_counters, passes_in, store_config
from .target import PutItem, TargetOptions


def _env(cfg: Config) -> dict[str, str]:
    return {
        "MOONCAKE_REDIS_EVICTION_POLICY": cfg.eviction_policy,
        "MOONCAKE_REDIS_DEFAULT_KV_LEASE_TTL_MS": str(cfg.default_kv_lease_ttl_ms),
        "MOONCAKE_REDIS_EVICTION_HIGH_WATERMARK_RATIO": str(cfg.eviction_high_watermark_ratio),
        "MOONCAKE_REDIS_EVICTION_RATIO": str(cfg.eviction_ratio),
    }


class WorkerTarget:
    def __init__(
        self,
        options: TargetOptions,
        svc: MasterService,
        fleet: WorkerFleet,
        embedded: EmbeddedTcpServer | None,
        own_namespace: bool,
    ) -> None:
        self.options = options
        self.svc = svc  # reads only: stored keys and counters
        self.fleet = fleet
        self.embedded = embedded
        self.own_namespace = own_namespace
        self.value_size = options.value_size
        scoring = f", {options.scoring}" if options.policy == "radix" else ""
        self.name = f"mooncake-redis ({options.policy}{scoring}, {len(fleet.urls)} workers)"
        self.clients = [AsyncMasterClient(u, retries=3) for u in fleet.urls]
        self._next = itertools.cycle(self.clients)
        self._pinger: asyncio.Task[None] | None = None

    async def start(self) -> None:
        c = self.clients[0]
        seg = {"id": "replay-seg-0", "base": 1 << 40, "size": self.options.capacity_bytes}
        await c.mount_segment(seg, CLIENT)
        self._pinger = asyncio.create_task(self._ping())

    async def _ping(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            with contextlib.suppress(MooncakeError, httpx.HTTPError):
                await next(self._next).ping(CLIENT)

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        return [r is True for r in await next(self._next).batch_exist_key(keys)]

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        c = next(self._next)
        keys = [it.key for it in items]
        res = await c.batch_put_start(
            CLIENT,
            keys,
            [[it.size] for it in items],
            [{"parent_block_hash": it.parent_block_hash} for it in items],
        )
        ok = [not isinstance(r, MooncakeError) for r in res]
        ends = await c.batch_put_end(CLIENT, [k for k, good in zip(keys, ok) if good])
        if any(e is not None for e in ends):  # pragma: no cover - would be a store bug
            raise next(e for e in ends if e is not None)
        return ok

    async def batch_get(self, keys: list[str]) -> list[bool]:
        res = await next(self._next).batch_get_replica_list(keys)
        return [not isinstance(r, MooncakeError) for r in res]

    async def stored_keys(self) -> set[str]:
        return await self.svc.complete_keys()

    async def counters(self) -> dict[str, int]:
        t = await self.svc.shard_totals("evicted_keys", "evicted_bytes")
        passes = 0
        for c in self.clients:
            with contextlib.suppress(MooncakeError, httpx.HTTPError):
                passes += passes_in(await c.metrics())
        return eviction_counters(passes, t)

    async def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
        for c in self.clients:
            await c.aclose()
        self.fleet.stop_all()
        try:
            if self.own_namespace and self.embedded is None:
                from ..bench.common import drop_namespace

                await drop_namespace(self.svc)
            await self.svc.aclose()
        finally:
            if self.embedded is not None:
                self.embedded.close()


async def create_worker_target(options: TargetOptions) -> WorkerTarget:
    embedded = None if options.redis_url else EmbeddedTcpServer()
    url = options.redis_url or (embedded.url if embedded else "")
    try:
        cfg = store_config(options, url)
        svc = await MasterService.from_url(url, cfg)  # creates the namespace's meta record
        fleet = WorkerFleet(
            url,
            cfg.namespace,
            cfg.num_shards,
            options.workers,
            radix=cfg.enable_radix_tree,
            env=_env(cfg),
            worker_args=["--evictor", "auto"],
        )
        await fleet.start_all()
    except BaseException:
        if embedded is not None:
            embedded.close()
        raise
    target = WorkerTarget(options, svc, fleet, embedded, "namespace" not in options.extra)
    try:
        await target.start()
    except BaseException:
        await target.close()
        raise
    return target
