"""The object store's request and reply types (Mooncake's names, snake_case), JSON-ready."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ErrorCode, MooncakeError

PROCESSING = "PROCESSING"
COMPLETE = "COMPLETE"


ADDRESS_SPACE = 1 << 64  # Mooncake's buffer addresses and sizes are uint64


def _int(field: str, value: Any, minimum: int = 0, maximum: int = ADDRESS_SPACE - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS, f"{field}: expected an integer, got {value!r}"
        )
    if value < minimum:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"{field}: must be >= {minimum}, got {value}")
    if value > maximum:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"{field}: must be <= {maximum}, got {value}")
    return value


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


@dataclass(frozen=True)
class SegmentStats:
    id: str
    name: str
    client_id: str
    size: int
    allocated: int
    mounted: bool
    allocations: int
    pending: int

    @property
    def used_ratio(self) -> float:
        return self.allocated / self.size if self.size else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_segment(seg: Segment | Mapping[str, Any]) -> Segment:
    s = seg if isinstance(seg, Segment) else Segment.from_dict(seg)
    _int("segment.base", s.base)
    _int("segment.size", s.size, 1)
    if s.base + s.size > ADDRESS_SPACE:  # every buffer address must fit in 64 bits
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS,
            f"segment: base + size = {s.base + s.size} exceeds the 64-bit address space",
        )
    for f in ("name", "te_endpoint", "protocol"):
        v = getattr(s, f)
        if not isinstance(v, str) or len(v) > 1024:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"segment.{f}: a string of <= 1024 chars")
    return s
