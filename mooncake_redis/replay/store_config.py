"""What the replay's targets on our store share (the in-process library, the worker processes,
the wire front end): the store's configuration, the one client id the replay runs as, and the
counters read from the workers' /metrics and the shard totals."""

from __future__ import annotations

import uuid

from ..config import Config
from .target import TargetOptions

CLIENT = "replay-engine"


def store_config(options: TargetOptions, url: str) -> Config:
    """The store's configuration for a replay (the same for the library and the workers)."""
    return Config(
        redis_url=url,
        namespace=options.extra.get("namespace") or "replay" + uuid.uuid4().hex[:8],
        num_shards=int(options.extra.get("num_shards", 0)),
        enable_radix_tree=options.policy == "radix",
        eviction_policy=options.scoring,
        default_kv_lease_ttl_ms=options.lease_ttl_ms,
        eviction_high_watermark_ratio=options.eviction_high_watermark_ratio,
        eviction_ratio=options.eviction_ratio,
    )


# Eviction passes: each worker counts those it ran while it held the evictor lease.
PASSES_METRIC = "master_successful_evictions_total"


def passes_in(metrics_text: str) -> int:
    """The eviction passes one worker's /metrics page reports."""
    return sum(
        int(float(line.split()[1]))
        for line in metrics_text.splitlines()
        if line.startswith(PASSES_METRIC + " ")
    )


def eviction_counters(passes: int, totals: dict[str, int]) -> dict[str, int]:
    """A target's ``counters()`` from the passes and the shards' ``evicted_*`` totals."""
    return {
        "evictions": passes,
        "evicted_keys": totals["evicted_keys"],
        "bytes_evicted": totals["evicted_bytes"],
        "removed": 0,
    }
