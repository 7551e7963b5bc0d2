"""Options shared by the worker-side subcommands; every one also reads a MOONCAKE_REDIS_*
variable (the Config fields through :meth:`Config.from_env`, the rest listed in ENV_OPTIONS)."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from typing import Any

from ..config import ENV_PREFIX, Config
from .common import add_redis_url, env_redis_url, non_negative_int

# CLI-only settings and the variables that provide their defaults (Config fields come on top).
ENV_OPTIONS: dict[str, str] = {
    "host": ENV_PREFIX + "HOST",
    "port": ENV_PREFIX + "PORT",
    "token": ENV_PREFIX + "TOKEN",
    "evictor": ENV_PREFIX + "EVICTOR",
    "fsck_interval": ENV_PREFIX + "FSCK_INTERVAL",
    "log_level": ENV_PREFIX + "LOG_LEVEL",
    "graceful_timeout": ENV_PREFIX + "GRACEFUL_TIMEOUT",
    "mooncake_port": ENV_PREFIX + "MOONCAKE_PORT",
}


def env(name: str, default: Any = None) -> Any:
    """The default of option ``name`` from its variable."""
    return os.environ.get(ENV_OPTIONS[name], default)


def known_env_names() -> set[str]:
    """Every MOONCAKE_REDIS_* name a worker-side command reads."""
    return {ENV_PREFIX + f.name.upper() for f in fields(Config)} | set(ENV_OPTIONS.values())


def add_config_args(p: argparse.ArgumentParser) -> None:
    """The store options. They have no defaults of their own (Config and its variables supply
    them), so a parser and its nested subcommands may all carry them: ``inspect --json stats``
    and ``inspect stats --json`` mean the same."""
    g = p.add_argument_group("store (also MOONCAKE_REDIS_<FIELD> for every Config field)")
    add_redis_url(g)
    g.add_argument(
        "--namespace",
        default=argparse.SUPPRESS,
        help="key namespace (default mc; env MOONCAKE_REDIS_NAMESPACE)",
    )
    g.add_argument(
        "--num-shards",
        type=non_negative_int,
        default=argparse.SUPPRESS,
        help="hash-tag shards, fixed at first use (default 0: the namespace's recorded count; "
        "a new one gets 1 on one Redis, 64 on a cluster; env MOONCAKE_REDIS_NUM_SHARDS)",
    )
    g.add_argument(
        "--enable-radix-tree",
        action="store_true",
        default=argparse.SUPPRESS,
        help="register puts in the radix index (env MOONCAKE_REDIS_ENABLE_RADIX_TREE)",
    )


def config_from_args(args: argparse.Namespace) -> Config:
    return Config.from_env(
        redis_url=getattr(args, "redis_url", None) or env_redis_url(),
        namespace=getattr(args, "namespace", None),
        num_shards=getattr(args, "num_shards", None),
        enable_radix_tree=getattr(args, "enable_radix_tree", None),
    )


# What each Config field means, for the generated table in docs/operations.md.
MEANINGS: dict[str, str] = {
    "redis_url": "Redis to use: redis://, rediss:// (TLS), redis+cluster://, unix://, "
    "fakeredis:// (embedded, one process only), or fakeredis+tcp://host:port (an embedded "
    "store served over TCP to several processes)",
    "namespace": "prefix of every Redis key; namespaces never touch each other",
    "num_shards": "hash-tag shards; fixed at first use and recorded in Redis. 0: the recorded "
    "count, or for a new namespace 1 on one Redis (standalone, embedded) and 64 on a cluster",
    "enable_radix_tree": "keep the radix-tree prefix index (RFC) next to the objects",
    "default_kv_lease_ttl_ms": "lease granted by reads and exists hits (Mooncake R; HEAD 10000)",
    "default_kv_soft_pin_ttl_ms": "soft-pin extension on lease grants",
    "allow_evict_soft_pinned_objects": "soft-pinned objects may be evicted (last)",
    "put_start_discard_timeout_ms": "an unfinished put may be taken over after this",
    "put_start_release_timeout_ms": "buffers of a discarded put are freed after this",
    "eviction_ratio": "fraction of objects an eviction pass frees",
    "eviction_high_watermark_ratio": "used ratio above which the evictor runs (HEAD 0.90)",
    "client_live_ttl_ms": "a client silent this long (of time the service heard) loses its "
    "segments",
    "heartbeat_gap_ms": "a pause of the service's own heartbeat longer than this (capped at half "
    "the client ttl: a Redis outage, an AOF restart, every worker down) restarts every client's "
    "clock",
    "unmount_check_owner": "only the client that mounted a segment may unmount it (Mooncake: "
    "anyone)",
    "max_key_length": "longest key or hash accepted",
    "key_hash_pattern": "regex with one group finding the block hash inside a key "
    "(for keys with a tag before the hash); unset = RFC Design 4",
    "radix_put_guard": "refuse puts under a parent block that is not stored or is an orphan",
    "orphan_eviction": "orphaned subtrees: first (every pass takes them before any leaf) or "
    "eager (also removed at the next janitor interval)",
    "dangling_edge_grace_ms": "fsck --repair drops dangling edges older than this",
    "eviction_policy": "leaf scoring: tiered[:F/X/Y[/G]] (default), lru or lru-freq[:W]",
    "radix_eviction_target": "where a radix pass started by the high watermark stops: watermark "
    "(at or below it, the RFC) or watermark-ratio (at or below it minus eviction_ratio)",
    "script_batch_size": "most items one Lua script call handles",
    "batch_chunk_size": "most keys a batch put reserves and commits at a time",
    "evictor_lease_ttl_ms": "evictor lease; a standby takes over about this long after a death",
    "janitor_interval_ms": "period of the janitor (client expiry, stale puts, frees)",
    "alloc_commit_deadline_ms": "a reservation older than this is never committed",
    "alloc_reclaim_grace_ms": "the janitor frees uncommitted reservations older than this",
    "wire_infer_parents": "Mooncake wire front end: infer radix parents from the order an "
    "unchanged client sends keys in (docs/wire.md)",
    "wire_parent_hint_ttl_ms": "how long an exists call's inferred parents are kept (in Redis)",
}


def config_table() -> str:
    """The Markdown table of every Config field, its variable, default and meaning."""
    rows = ["| field | variable | default | meaning |", "|---|---|---|---|"]
    for f in fields(Config):
        default = f.default if not callable(f.default) else None
        rows.append(
            f"| `{f.name}` | `{ENV_PREFIX}{f.name.upper()}` | `{default!r}` | "
            f"{MEANINGS.get(f.name, '')} |"
        )
    return "\n".join(rows) + "\n"
