"""Prometheus metrics of a worker: per-RPC counters and latencies (this process), store and
radix gauges (read from Redis: the same on every worker), and the cached figures of a periodic
background fsck (orphans, dangling edges, shells, depth).

Gauges come from the per-shard counters (``<shard tag>:stats`` HASH: ``nodes``, ``rkeys``,
``objects``, ``bytes``, ``put_start_discard_cnt``, and whatever counters eviction adds), the
per-shard leaf index sizes (ZCARD), the segment registry and the client ZSET: one pipelined read
per scrape, never a scan of objects or nodes. A scrape re-reads them at most once per
``refresh_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..fsck import fsck
from ..outage import FailureLog
from ..records import _s
from .schemas import Rpc

if TYPE_CHECKING:
    from ..service import MasterService

log = logging.getLogger("mooncake_redis.server")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
)  # fmt: skip

# Per-shard counter fields -> (metric name, help, kind). Unlisted numeric fields are exported as
# mooncake_shard_counter{field=...}.
SHARD_FIELDS: dict[str, tuple[str, str, str]] = {
    "objects": ("master_key_count", "Objects in the store (any status).", "gauge"),
    "bytes": ("mooncake_object_bytes", "Sum of object sizes in bytes.", "gauge"),
    "soft_pinned": ("master_soft_pin_key_count", "Soft-pinned objects.", "gauge"),
    "put_start_discard_cnt": (
        "master_put_start_discard_cnt",
        "Stale PROCESSING puts discarded.",
        "counter",
    ),
    "evicted_keys": ("master_evicted_key_count", "Objects evicted (all evictors).", "counter"),
    "nodes": ("mooncake_radix_nodes", "Radix nodes (with keys or shells).", "gauge"),
    "rkeys": ("mooncake_radix_registered_keys", "Keys registered in the radix index.", "gauge"),
}


class RpcMetrics:
    """This process's per-RPC request, failure and latency figures."""

    def __init__(self, registry: CollectorRegistry, rpcs: Iterable[Rpc]) -> None:
        self.latency = Histogram(
            "mooncake_rpc_latency_seconds",
            "Latency of each RPC as served by this worker.",
            ["rpc"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.requests: dict[str, Counter] = {}
        self.failures: dict[str, Counter] = {}
        self.latencies: dict[str, Histogram] = {}  # the labelled children, looked up once
        self.items: dict[str, Counter] = {}
        self.failed_items: dict[str, Counter] = {}
        for rpc in rpcs:
            n = rpc.name
            self.latencies[n] = self.latency.labels(n)
            self.requests[n] = Counter(
                f"master_{n}_requests_total", f"{n} requests.", registry=registry
            )
            self.failures[n] = Counter(
                f"master_{n}_failures_total", f"{n} requests that failed.", registry=registry
            )
            if rpc.batch:
                self.items[n] = Counter(f"master_{n}_items_total", f"{n} items.", registry=registry)
                self.failed_items[n] = Counter(
                    f"master_{n}_failed_items_total", f"{n} items that failed.", registry=registry
                )

    def observe(
        self, name: str, seconds: float, failed: bool, items: int = 0, failed_items: int = 0
    ) -> None:
        self.latencies[name].observe(seconds)
        self.requests[name].inc()
        if failed:
            self.failures[name].inc()
        if name in self.items:
            self.items[name].inc(items)
            self.failed_items[name].inc(failed_items)


class StoreCollector(Collector):
    """Gauges read from Redis (refreshed by :meth:`refresh`) and the cached fsck figures."""

    def __init__(self, service: MasterService, refresh_s: float = 1.0) -> None:
        self.service = service
        self.refresh_s = refresh_s
        self.shard: dict[str, float] = {}
        self.leaves = 0
        self.segments: list[Any] = []
        self.active_clients = 0
        self.evictor: dict[str, str] = {}
        self.fsck: dict[str, Any] | None = None
        self.fsck_time = 0.0
        self.fsck_seconds = 0.0
        self.fsck_runs = 0
        self.refreshed = 0.0
        self.refresh_errors = 0
        self._failures = FailureLog(log, "metrics refresh", base_s=0.0)
        self._lock = asyncio.Lock()

    async def refresh(self, force: bool = False) -> None:
        async with self._lock:
            if not force and time.monotonic() - self.refreshed < self.refresh_s:
                return
            try:
                await self._read()
                self.refreshed = time.monotonic()
                self._failures.ok()
            except Exception as exc:  # a failed scrape must not fail the endpoint
                self.refresh_errors += 1
                self._failures.failed(exc)  # one log line per change of state

    async def _read(self) -> None:
        svc = self.service
        keys = svc.keys
        pipe = svc.backend.pipeline()
        for shard in range(keys.num_shards):
            pipe.hgetall(keys.anchor(shard))
            pipe.zcard(keys.shard_key(shard, "leaves"))
        replies = await svc.backend.execute(pipe, "metrics scrape")
        totals: dict[str, float] = {}
        leaves = 0
        for i in range(0, len(replies), 2):
            for k, v in (replies[i] or {}).items():
                with contextlib.suppress(ValueError):
                    totals[_s(k)] = totals.get(_s(k), 0.0) + float(_s(v))
            leaves += int(replies[i + 1] or 0)
        self.shard = totals
        self.leaves = leaves
        self.segments = list(await svc.segment_stats())
        now = await svc.backend.time_ms()
        self.active_clients = int(
            await svc.backend.command(
                "ZCOUNT", keys.global_key("clients"), now - svc.config.client_live_ttl_ms, "+inf"
            )
        )
        raw = await svc.backend.command("HGETALL", keys.global_key("evictor"))
        self.evictor = {_s(k): _s(v) for k, v in (raw or {}).items()}

    async def run_fsck(self) -> None:
        """One check-only fsck (it counts orphans too); the result is cached for the gauges."""
        start = time.monotonic()
        report = await fsck(self.service, repair=False)
        d = report.to_dict()
        d["orphaned_objects"] = report.counts.get("orphans", 0)
        self.fsck = d
        self.fsck_time = time.time()
        self.fsck_seconds = time.monotonic() - start
        self.fsck_runs += 1

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Any] = {}
        for fld, (name, doc, kind) in SHARD_FIELDS.items():
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            families[name] = cls(name, doc, value=self.shard.get(fld, 0.0))
        other = GaugeMetricFamily(
            "mooncake_shard_counter", "Other per-shard counters, summed.", labels=["field"]
        )
        for fld, value in sorted(self.shard.items()):
            if fld not in SHARD_FIELDS:
                other.add_metric([fld], value)
        yield from families.values()
        yield other
        yield GaugeMetricFamily(
            "mooncake_radix_leaves", "Evictable leaves (leaf index size).", value=self.leaves
        )
        mounted = [s for s in self.segments if s.mounted]
        yield GaugeMetricFamily(
            "master_allocated_bytes",
            "Allocated bytes over mounted segments.",
            value=sum(s.allocated for s in mounted),
        )
        yield GaugeMetricFamily(
            "master_total_capacity_bytes",
            "Capacity of the mounted segments.",
            value=sum(s.size for s in mounted),
        )
        seg_alloc = GaugeMetricFamily(
            "segment_allocated_bytes", "Allocated bytes per segment.", labels=["segment"]
        )
        seg_cap = GaugeMetricFamily(
            "segment_total_capacity_bytes", "Capacity per segment.", labels=["segment"]
        )
        for s in mounted:
            seg_alloc.add_metric([s.id], s.allocated)
            seg_cap.add_metric([s.id], s.size)
        yield seg_alloc
        yield seg_cap
        yield GaugeMetricFamily(
            "master_active_clients", "Clients that pinged within client_live_ttl.",
            value=self.active_clients,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "mooncake_evictor_epoch",
            "Epoch of the evictor lease (grows on every takeover).",
            value=float(self.evictor.get("epoch", 0) or 0),
        )
        yield GaugeMetricFamily(
            "mooncake_metrics_refresh_errors", "Failed reads of the store gauges.",
            value=self.refresh_errors,
        )  # fmt: skip
        if self.fsck is not None:
            counts = self.fsck.get("counts", {})
            kinds = self.fsck.get("kinds", {})
            yield GaugeMetricFamily(
                "mooncake_radix_shells", "Nodes without keys (fsck).", value=counts.get("shells", 0)
            )
            yield GaugeMetricFamily(
                "mooncake_radix_max_depth", "Deepest parent chain (fsck).",
                value=counts.get("max_depth", 0),
            )  # fmt: skip
            yield GaugeMetricFamily(
                "mooncake_radix_orphaned_objects",
                "Registered keys whose parent node is missing or a shell (fsck).",
                value=self.fsck.get("orphaned_objects", 0),
            )
            yield GaugeMetricFamily(
                "mooncake_radix_dangling_edges", "Edges to a missing child (fsck).",
                value=kinds.get("dangling_edge", 0),
            )  # fmt: skip
            problems = GaugeMetricFamily(
                "mooncake_fsck_problems", "Unrepaired problems by kind (fsck).", labels=["kind"]
            )
            for kind, n in sorted(kinds.items()):
                problems.add_metric([kind], n)
            yield problems
            yield GaugeMetricFamily(
                "mooncake_fsck_clean", "1 when the last fsck was clean.",
                value=1.0 if self.fsck.get("clean") else 0.0,
            )  # fmt: skip
            yield GaugeMetricFamily(
                "mooncake_fsck_last_run_timestamp_seconds", "When the cached fsck ran.",
                value=self.fsck_time,
            )  # fmt: skip
            yield GaugeMetricFamily(
                "mooncake_fsck_duration_seconds", "How long the cached fsck took.",
                value=self.fsck_seconds,
            )  # fmt: skip


class EvictionCollector(Collector):
    """Mooncake's eviction counters, from this process's evictor (EvictionMetrics)."""

    NAMES = (
        ("passes", "master_attempted_evictions_total", "Eviction passes attempted."),
        ("passes", "mooncake_eviction_passes_total", "Eviction passes run by this process."),
        ("successful_passes", "master_successful_evictions_total", "Passes that evicted."),
        ("evicted_keys", "mooncake_evictor_evicted_keys_total", "Objects this process evicted."),
        ("evicted_bytes", "master_evicted_size_bytes", "Bytes evicted."),
        ("evicted_leaves", "mooncake_evicted_leaves_total", "Radix leaves evicted."),
        ("lease_acquired", "mooncake_evictor_lease_acquired_total", "Evictor lease takeovers."),
        ("lease_lost", "mooncake_evictor_lease_lost_total", "Evictor leases lost."),
        ("janitor_runs", "mooncake_janitor_runs_total", "Janitor runs by the evictor."),
    )

    def __init__(self, source: Any) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        for attr, name, doc in self.NAMES:
            value = float(getattr(self.source, attr, 0) or 0)
            yield CounterMetricFamily(name, doc, value=value)
        yield GaugeMetricFamily(
            "mooncake_eviction_max_cascade_depth",
            "Deepest cascade (leaf levels reclaimed) of one pass of this process's evictor.",
            value=float(getattr(self.source, "max_cascade_depth", 0) or 0),
        )


class Metrics:
    """Everything /metrics shows for one worker (its own registry: several apps per process)."""

    def __init__(self, rpcs: Iterable[Rpc]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.rpc = RpcMetrics(self.registry, rpcs)
        self.cascade_depth = Histogram(
            "mooncake_eviction_cascade_depth",
            "Cascade depth (parent levels reached) per eviction pass of this process.",
            buckets=(0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=self.registry,
        )
        self.store: StoreCollector | None = None

    def watch_eviction(self, source: Any) -> None:
        """Export the passes of this process's evictor (an EvictionMetrics with listeners)."""

        def on_pass(result: Any) -> None:
            self.cascade_depth.observe(result.cascade_depth)

        source.add_listener(on_pass)
        self.registry.register(EvictionCollector(source))

    def attach(self, service: MasterService, refresh_s: float = 1.0) -> StoreCollector:
        self.store = StoreCollector(service, refresh_s)
        self.registry.register(self.store)
        return self.store

    async def render(self) -> bytes:
        if self.store is not None:
            await self.store.refresh()
        return generate_latest(self.registry)
