"""Our store's configuration for a replay and the one client id the replay runs as: the same for
the in-process library, the worker processes and the wire front end."""

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
        num_shards=int(options.extra.get("num_shards", 64)),
        enable_radix_tree=options.policy == "radix",
        eviction_policy=options.scoring,
        default_kv_lease_ttl_ms=options.lease_ttl_ms,
        eviction_high_watermark_ratio=options.eviction_high_watermark_ratio,
        eviction_ratio=options.eviction_ratio,
    )
