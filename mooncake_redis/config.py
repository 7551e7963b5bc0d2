"""One configuration object: the Mooncake master's defaults (RFC-era "R" values) plus our own."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import ErrorCode, MooncakeError

ENV_PREFIX = "MOONCAKE_REDIS_"
# 2: u64 values as fixed-width hex (offsets, lengths, bases, sizes); 3: the lean layout (replica
# record "id,st,ref,off,len" with a per-shard segment table, no per-shard objects/nodes SETs);
# 4: allocation records in buckets; 5: the object prefix only when the key does not say it;
# 6: a block key's object fields in its block hash (with its radix node), put time "pt";
# 7: rad '2' marks a registered object with a pin or a stored prefix (a block key's hot read);
# 8: an object's client c is a ref into the shard's client table (cids), not the client id.
# 9: one-letter object and node field names, a node's parent p as '>' + 32 bytes, no h until a
#    hit, no g when the edge was made in the node's created ms, base64url put ids.
SCHEMA_VERSION = 9


# The shard count of a new namespace when ``num_shards`` is left at 0. Shards exist to spread a
# cluster's slots over its nodes; on one Redis they only add per-shard work to every batch call
# (docs/architecture.md "How many shards").
SINGLE_REDIS_SHARDS = 1
CLUSTER_SHARDS = 64

RADIX_EVICTION_TARGETS = ("watermark", "watermark-ratio")
# The radix leaf policy (eviction/policy.py; why tiered: docs/eviction.md).
DEFAULT_EVICTION_POLICY = "tiered"


@dataclass(frozen=True)
class Config:
    # Where the store lives. "fakeredis://" is the embedded default (no server needed).
    redis_url: str = "fakeredis://"
    # Namespace prefix of every Redis key; two namespaces never touch each other's keys.
    namespace: str = "mc"
    # Hash-tag shards. Fixed at first use and recorded in Redis (see keys.py / namespace.py).
    # 0: the namespace's recorded count; a new namespace gets SINGLE_REDIS_SHARDS on one Redis
    # (standalone or embedded) and CLUSTER_SHARDS on a cluster (default_shards).
    num_shards: int = 0
    enable_radix_tree: bool = False

    # Mooncake master defaults (the RFC's "R" column; HEAD values in comments).
    default_kv_lease_ttl_ms: int = 5_000  # HEAD: 10_000
    default_kv_soft_pin_ttl_ms: int = 30 * 60 * 1000
    allow_evict_soft_pinned_objects: bool = True
    put_start_discard_timeout_ms: int = 30_000
    put_start_release_timeout_ms: int = 600_000
    eviction_ratio: float = 0.05
    eviction_high_watermark_ratio: float = 0.95  # HEAD: 0.90
    client_live_ttl_ms: int = 10_000
    # UnmountSegment ownership: Mooncake lets any caller unmount any segment (off, the default,
    # for drop-in compatibility); on, only the client that mounted a segment may unmount it.
    unmount_check_owner: bool = False
    # The service's own heartbeat (pings, mounts, workers' ticks): a pause longer than this
    # (a Redis outage, a restart from AOF, every worker down) restarts every client's clock, so
    # that no client is expired for a silence the service could not hear. Capped at half the
    # client ttl (see heartbeat_gap).
    heartbeat_gap_ms: int = 3_000

    # Input limits.
    max_key_length: int = 4096
    # Optional regex with one group that finds the 64-hex block hash inside a key, for key formats
    # that put a tag before the hash ("<tag>_<model>_<hash>_0_k"). None = RFC Design 4 only.
    key_hash_pattern: str | None = None

    # With the radix index: refuse a put whose parent block is not completely stored (it would be
    # an orphan) and roll back a block accepted only in part, so the store never holds orphans or
    # partial blocks. Off = the RFC's plain Path A (a child may arrive before its parent).
    radix_put_guard: bool = True
    # Orphaned subtrees (their parent block's objects were removed, revoked, unmounted): never a
    # prefix hit again. "first": every eviction pass takes them before any other leaf;
    # "eager": also removed at the next janitor interval without memory pressure (they go
    # with their parent).
    orphan_eviction: str = "first"
    # Radix index maintenance.
    dangling_edge_grace_ms: int = 60_000
    # Eviction scoring among leaves (eviction/policy.py, docs/eviction.md): "tiered[:F/X/Y[/G]]"
    # (leaf-first LRU in logical time with fresh / exposed / found tiers, the default),
    # "lru" (lease order, as Mooncake) or "lru-freq[:W]".
    eviction_policy: str = DEFAULT_EVICTION_POLICY
    # Where a radix pass started by the high watermark stops: "watermark" (used ratio at or below
    # eviction_high_watermark_ratio, the RFC's sole exit condition) or "watermark-ratio" (at or
    # below high watermark - eviction_ratio, as deep as Mooncake's BatchEvict goes). A pass after
    # a failed allocation always frees at least eviction_ratio of the capacity.
    radix_eviction_target: str = "watermark"
    # Upper bound on items one script call handles; callers loop.
    script_batch_size: int = 256
    # A batch put reserves and commits this many keys at a time (any batch size succeeds: no
    # reservation waits past alloc_commit_deadline_ms for the rest of its batch).
    batch_chunk_size: int = 2048

    # Coordination (evictor and janitor lease) and allocation safety windows.
    evictor_lease_ttl_ms: int = 3_000
    janitor_interval_ms: int = 1_000
    alloc_commit_deadline_ms: int = 10_000
    alloc_reclaim_grace_ms: int = 60_000

    # Mooncake wire front end: infer radix parents from the order an unchanged client sends keys
    # in (exists over the prefix path, then a put of the missing suffix; see wire/parents.py),
    # and how long one exists call's hints last.
    wire_infer_parents: bool = False
    wire_parent_hint_ttl_ms: int = 60_000

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> MooncakeError:
            return MooncakeError(ErrorCode.INVALID_PARAMS, f"config {field}: {why}")

        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", self.namespace):
            raise bad("namespace", "1-32 characters of [A-Za-z0-9_.-]")
        if not 0 <= self.num_shards <= 16384:
            raise bad("num_shards", "must be in 1..16384, or 0 for the default")
        if self.put_start_release_timeout_ms <= self.put_start_discard_timeout_ms:
            raise bad("put_start_release_timeout_ms", "must exceed put_start_discard_timeout_ms")
        if not 0.0 <= self.eviction_ratio <= 1.0:
            raise bad("eviction_ratio", "must be in [0, 1]")
        if not 0.0 < self.eviction_high_watermark_ratio <= 1.0:
            raise bad("eviction_high_watermark_ratio", "must be in (0, 1]")
        if self.max_key_length < 1:
            raise bad("max_key_length", "must be positive")
        if self.key_hash_pattern is not None:
            try:
                pat = re.compile(self.key_hash_pattern)
            except re.error as exc:
                raise bad("key_hash_pattern", f"invalid regex: {exc}") from exc
            if pat.groups != 1:
                raise bad("key_hash_pattern", "needs exactly one capturing group")
        if self.alloc_reclaim_grace_ms <= self.alloc_commit_deadline_ms:
            raise bad("alloc_reclaim_grace_ms", "must exceed alloc_commit_deadline_ms")
        if self.orphan_eviction not in ("first", "eager"):
            raise bad("orphan_eviction", "first or eager")
        if self.radix_eviction_target not in RADIX_EVICTION_TARGETS:
            raise bad("radix_eviction_target", f"one of {', '.join(RADIX_EVICTION_TARGETS)}")
        if self.heartbeat_gap_ms < 1 or self.client_live_ttl_ms < 1:
            raise bad("heartbeat_gap_ms", "it and client_live_ttl_ms must be positive")
        if self.batch_chunk_size < 1:
            raise bad("batch_chunk_size", "must be positive")
        if self.script_batch_size < 1:
            raise bad("script_batch_size", "must be positive")
        if self.wire_parent_hint_ttl_ms < 1:
            raise bad("wire_parent_hint_ttl_ms", "must be positive")

    @property
    def heartbeat_gap(self) -> int:
        """The gap in ms that restarts client clocks: below the client ttl, so that an outage
        too short to restart them is also too short to expire anyone."""
        return max(1, min(self.heartbeat_gap_ms, self.client_live_ttl_ms // 2))

    def default_shards(self, cluster: bool) -> int:
        """The shard count this config asks for on a new namespace (num_shards 0: by topology)."""
        if self.num_shards:
            return self.num_shards
        return CLUSTER_SHARDS if cluster else SINGLE_REDIS_SHARDS

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Fields from MOONCAKE_REDIS_<FIELD> variables; explicit overrides win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = _parse(f.name, str(f.type), raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _parse(name: str, type_name: str, raw: str) -> Any:
    try:
        if type_name == "bool":
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name == "str | None":
            return raw or None
        return raw
    except ValueError as exc:
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS, f"{ENV_PREFIX}{name.upper()}: cannot parse {raw!r}"
        ) from exc
