"""Our workers behind the Mooncake master's own protocol, driven by the real, unchanged client
(``replay --target wire``): the same client and calling pattern as ``--target mooncake``, so the
two run side by side in one command.

The workers are ``serve --mooncake-port`` processes sharing one coro_rpc port (SO_REUSEPORT),
with the embedded store served over TCP when no Redis URL is given; the client's transfer
engine registers its segment through worker 0's ``/metadata``. The workers run the eviction
coordinator themselves. With the radix policy the front end infers parents from the calling
order (``wire_infer_parents``), since the client cannot send them; ``--no-infer-parents`` turns
that off to compare.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from ..backend import EmbeddedTcpServer
from ..config import Config
from ..server.fleet import WorkerFleet, free_port
from ..service import MasterService
from .mooncake_target import MooncakeTarget
from .store_config import eviction_counters, passes_in, store_config
from .target import ReplayTarget, TargetOptions


class FleetMaster:
    """A ``MasterEndpoint`` made of our worker processes."""

    def __init__(
        self, fleet: WorkerFleet, embedded: EmbeddedTcpServer | None, own_namespace: bool
    ) -> None:
        self.fleet = fleet
        self.embedded = embedded
        self.own_namespace = own_namespace
        self.rpc_address = fleet.mooncake_address
        self.metadata_url = fleet.urls[0] + "/metadata"
        self.admin_url = fleet.urls[0]
        self.metrics_urls = list(fleet.urls)

    async def counters(self) -> dict[str, int]:
        """Evicted counts straight from the shard counters (a worker's /metrics caches them for
        a second, which would let a final snapshot miss the last pass); passes from every
        worker's /metrics, since whichever holds the evictor lease counts its own."""
        f = self.fleet
        cfg = Config(redis_url=f.redis_url, namespace=f.namespace, num_shards=f.num_shards)
        svc = await MasterService.from_url(f.redis_url, cfg, create=False)  # reads only
        try:
            t = await svc.shard_totals("evicted_keys", "evicted_bytes")
        finally:
            await svc.aclose()
        passes = 0
        async with httpx.AsyncClient() as http:
            for url in self.metrics_urls:
                passes += passes_in((await http.get(url + "/metrics", timeout=10)).text)
        return eviction_counters(passes, t)

    def stop(self) -> None:
        try:
            self.fleet.stop_all()
            if self.own_namespace and self.embedded is None:
                asyncio.run(self._drop_namespace())
        finally:
            if self.embedded is not None:
                self.embedded.close()

    async def _drop_namespace(self) -> None:
        from ..bench.common import drop_namespace

        f = self.fleet
        cfg = Config(
            redis_url=f.redis_url,
            namespace=f.namespace,
            num_shards=f.num_shards,
            enable_radix_tree=f.radix,
        )
        svc = await MasterService.from_url(f.redis_url, cfg)
        try:
            await drop_namespace(svc)
        finally:
            await svc.aclose()


def start_fleet(options: TargetOptions) -> FleetMaster:
    """Blocking: starts the workers and waits until they serve."""
    embedded = None if options.redis_url else EmbeddedTcpServer()
    url = options.redis_url or (embedded.url if embedded else "")
    cfg = store_config(options, url)
    infer = options.policy == "radix" and options.extra.get("infer_parents", "1") == "1"
    env = {
        "MOONCAKE_REDIS_EVICTION_POLICY": cfg.eviction_policy,
        "MOONCAKE_REDIS_DEFAULT_KV_LEASE_TTL_MS": str(cfg.default_kv_lease_ttl_ms),
        "MOONCAKE_REDIS_EVICTION_HIGH_WATERMARK_RATIO": str(cfg.eviction_high_watermark_ratio),
        "MOONCAKE_REDIS_EVICTION_RATIO": str(cfg.eviction_ratio),
        "MOONCAKE_REDIS_WIRE_INFER_PARENTS": "true" if infer else "false",
    }
    fleet = WorkerFleet(
        url,
        cfg.namespace,
        cfg.num_shards,
        max(1, options.workers),
        radix=cfg.enable_radix_tree,
        env=env,
        worker_args=["--evictor", "auto"],
        mooncake_port=free_port(),
    )
    try:
        asyncio.run(fleet.start_all())
    except BaseException:
        if embedded is not None:
            embedded.close()
        raise
    return FleetMaster(fleet, embedded, "namespace" not in options.extra)


async def create_wire_target(options: TargetOptions) -> ReplayTarget:
    """Registry factory: start the workers, then the real client against them."""
    workers = max(1, options.workers)
    infer = options.policy == "radix" and options.extra.get("infer_parents", "1") == "1"
    detail = f"{options.policy}, {workers} worker{'s' if workers > 1 else ''}"
    detail += ", inferred parents" if infer else ""
    name = f"mooncake-redis over the wire ({detail})"

    def master(_: Path) -> FleetMaster:
        return start_fleet(options)

    # The target stops the master side itself when its client cannot start.
    return await asyncio.to_thread(MooncakeTarget, options, 128, master, name)
