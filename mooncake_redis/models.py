"""The object store's checks and statistics; its RPC types live in :mod:`.types` (re-exported
here, their first home)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ErrorCode, MooncakeError
from .types import (
    ConfigArg,
    GetReplicaListResponse,
    PingResponse,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
)

__all__ = [
    "ADDRESS_SPACE",
    "COMPLETE",
    "PROCESSING",
    "ConfigArg",
    "GetReplicaListResponse",
    "PingResponse",
    "ReplicaDescriptor",
    "ReplicateConfig",
    "Segment",
    "SegmentStats",
    "check_segment",
]

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
