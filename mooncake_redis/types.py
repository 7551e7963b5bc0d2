"""The types of the RPCs: what callers pass and get back, in process or over HTTP.

No Redis, no service: the HTTP clients import this module only (``import mooncake_redis.client``
must stay light), and the wire front end and the structure to come depend on it and on the
MasterService facade. The old homes re-export every name (models, radix, eviction.metrics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ErrorCode, MooncakeError

# -- the object store ---------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A buffer a client mounts: ``size`` bytes at ``base`` in its address space."""

    id: str
    name: str
    base: int
    size: int
    te_endpoint: str = ""
    protocol: str = "tcp"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Segment:
        return cls(
            id=str(d.get("id", "")),
            name=str(d.get("name", d.get("id", ""))),
            base=d.get("base", 0),
            size=d.get("size", 0),
            te_endpoint=str(d.get("te_endpoint", "")),
            protocol=str(d.get("protocol", "tcp")),
        )


@dataclass(frozen=True)
class ReplicateConfig:
    """Mooncake's ReplicateConfig (R) plus the RFC's ``parent_block_hash``."""

    replica_num: int = 1
    with_soft_pin: bool = False
    with_hard_pin: bool = False
    preferred_segments: tuple[str, ...] = ()
    preferred_segment: str = ""  # deprecated; wins over preferred_segments when set
    prefer_alloc_in_same_node: bool = False  # accepted, not used (no client topology here)
    parent_block_hash: str = ""

    def preferred(self) -> list[str]:
        return [self.preferred_segment] if self.preferred_segment else list(self.preferred_segments)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["preferred_segments"] = list(self.preferred_segments)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicateConfig:
        return cls(
            replica_num=d.get("replica_num", 1),
            with_soft_pin=bool(d.get("with_soft_pin", False)),
            with_hard_pin=bool(d.get("with_hard_pin", False)),
            preferred_segments=tuple(d.get("preferred_segments", ()) or ()),
            preferred_segment=str(d.get("preferred_segment", "") or ""),
            prefer_alloc_in_same_node=bool(d.get("prefer_alloc_in_same_node", False)),
            parent_block_hash=str(d.get("parent_block_hash", "") or ""),
        )

    @classmethod
    def coerce(cls, value: ReplicateConfig | Mapping[str, Any] | None) -> ReplicateConfig:
        if value is None:
            return cls()
        if isinstance(value, ReplicateConfig):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        raise MooncakeError(ErrorCode.INVALID_PARAMS, "config: expected a ReplicateConfig")


@dataclass(frozen=True)
class ReplicaDescriptor:
    """A memory replica: ``size`` bytes at ``buffer_address`` (segment base + offset)."""

    replica_id: int
    status: str
    segment_id: str
    segment_name: str
    buffer_address: int
    size: int
    protocol: str
    transport_endpoint: str
    offset: int = 0  # inside the segment (ours; Mooncake has only the address)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaDescriptor:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


_new = object.__new__
_DESCRIPTOR_FIELDS = (
    "replica_id", "status", "segment_id", "segment_name", "buffer_address", "size", "protocol",
    "transport_endpoint", "offset",
)  # fmt: skip
if tuple(ReplicaDescriptor.__dataclass_fields__) != _DESCRIPTOR_FIELDS:  # pragma: no cover
    raise ImportError("replica_descriptor: ReplicaDescriptor's fields changed")


def replica_descriptor(
    replica_id: int, status: str, segment_id: str, segment_name: str, buffer_address: int,
    size: int, protocol: str, transport_endpoint: str, offset: int,
) -> ReplicaDescriptor:  # fmt: skip
    """ReplicaDescriptor(...) for hot paths: a frozen dataclass's __init__ sets each field through
    object.__setattr__ (about 5 us a descriptor here); this fills the instance dict at once. The
    same object (equality, hash, repr): the fields are checked against the class at import."""
    d: ReplicaDescriptor = _new(ReplicaDescriptor)
    d.__dict__.update(
        replica_id=replica_id, status=status, segment_id=segment_id, segment_name=segment_name,
        buffer_address=buffer_address, size=size, protocol=protocol,
        transport_endpoint=transport_endpoint, offset=offset,
    )  # fmt: skip
    return d


@dataclass(frozen=True)
class GetReplicaListResponse:
    replicas: list[ReplicaDescriptor]
    lease_ttl_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {"replicas": [r.to_dict() for r in self.replicas], "lease_ttl_ms": self.lease_ttl_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GetReplicaListResponse:
        return cls(
            replicas=[ReplicaDescriptor.from_dict(r) for r in d.get("replicas", [])],
            lease_ttl_ms=int(d.get("lease_ttl_ms", 0)),
        )


@dataclass(frozen=True)
class PingResponse:
    view_version_id: int
    client_status: str  # "OK" or "NEED_REMOUNT"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PingResponse:
        return cls(int(d.get("view_version_id", 0)), str(d.get("client_status", "")))


ConfigArg = ReplicateConfig | Mapping[str, Any] | None


# -- the radix index ----------------------------------------------------------------------


@dataclass(frozen=True)
class RadixNode:
    prefix_hash: str
    parent_prefix_hash: str
    keys: list[str]
    children: list[str]
    created_ms: int = 0
    score: float = 0.0
    hits: int = 0
    link_generation: int = 0
    child_generations: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_shell(self) -> bool:
        return not self.keys

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix_hash": self.prefix_hash,
            "parent_prefix_hash": self.parent_prefix_hash,
            "keys": self.keys,
            "children": self.children,
            "is_shell": self.is_shell,
            "is_leaf": self.is_leaf,
        }


@dataclass(frozen=True)
class RegisterItem:
    prefix_hash: str
    parent_prefix_hash: str
    keys: list[str]


@dataclass(frozen=True)
class SubtreeResult:
    root: str
    nodes: dict[str, RadixNode]
    depth_reached: int
    truncated: bool  # nodes exist below max_depth

    @property
    def keys(self) -> list[str]:
        return [k for node in self.nodes.values() for k in node.keys]

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "nodes": [n.to_dict() for n in self.nodes.values()],
            "keys": self.keys,
            "depth_reached": self.depth_reached,
            "truncated": self.truncated,
        }


# -- eviction -----------------------------------------------------------------------------

SKIP_REASONS = ("lease", "hard", "soft", "busy", "inner", "gone", "tree")


@dataclass
class EvictionResult:
    """One pass. ``mode``: "radix" (leaf-first, with the no-tree fallback), "batch"
    (Mooncake's BatchEvict) or "none" (nothing to do, or the lease is held elsewhere)."""

    mode: str = "none"
    # watermark | redis_memory | alloc_failed | forced | max_objects | orphans | idle | lease_held
    reason: str = ""
    policy: str = ""
    epoch: int = 0
    evicted_keys: list[str] = field(default_factory=list)  # object keys erased
    evicted_objects: int = 0
    evicted_leaves: int = 0
    unregistered_keys: int = 0  # registered but not stored keys dropped with their leaf
    bytes: int = 0
    fallback_objects: int = 0  # objects of no tree evicted by the BatchEvict fallback
    orphan_objects: int = 0  # objects of orphaned subtrees (evicted first)
    soft_pinned_objects: int = 0
    cascade_depth: int = 0  # radix: leaf levels reclaimed (1 = leaves only)
    rounds: int = 0  # radix: choose/evict rounds; batch: 1 or 2 passes
    batches: int = 0  # writing script calls
    candidate_reads: int = 0  # read script calls
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    used_before: float = 0.0
    used_after: float = 0.0
    seconds: float = 0.0
    round_leaves: list[list[str]] = field(default_factory=list)  # radix: leaves per round
    holder: str = ""  # the lease holder when reason == "lease_held"

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def to_dict(self, with_keys: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_keys:
            d.pop("evicted_keys")
            d.pop("round_leaves")
        return d
