"""The request and response bodies of the HTTP API (pydantic models, strict).

Request models are strict: unknown fields, wrong types and malformed JSON are INVALID_PARAMS.
Values the types allow but the semantics refuse (an empty key, replica_num 0) are checked by the
library and come back with its error code. Field names are the library method's parameters.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..types import RegisterItem, ReplicateConfig, Segment

MAX_BATCH = 8192  # items per batch request; larger batches are INVALID_PARAMS
MAX_STR = 1 << 16

Key = Field(max_length=MAX_STR)
Keys = Field(max_length=MAX_BATCH)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Request(Strict):
    """A request body: its fields are the keyword arguments of the library method."""

    _nested: ClassVar[tuple[str, ...]] = ()  # fields that may hold a Body (or a list of them)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._nested = tuple(n for n, f in cls.model_fields.items() if _holds_body(f.annotation))

    def to_kwargs(self) -> dict[str, Any]:
        """The library's keyword arguments; plain fields as validated (no walk over lists)."""
        kwargs = dict(self.__dict__)
        for name in self._nested:
            kwargs[name] = _to_lib(kwargs[name])
        return kwargs


def _holds_body(tp: Any) -> bool:
    if isinstance(tp, type) and issubclass(tp, Body):
        return True
    return any(_holds_body(arg) for arg in get_args(tp))


def _to_lib(value: Any) -> Any:
    if isinstance(value, Body):
        return value.to_lib()
    if isinstance(value, list):
        return [_to_lib(v) for v in value]
    return value


class Body(Strict):
    """A nested body part with a library type."""

    def to_lib(self) -> Any:
        return self.model_dump()


# -- errors --------------------------------------------------------------------------------


class ErrorBody(Strict):
    code: int = Field(description="Mooncake ErrorCode value, e.g. -704")
    name: str = Field(description="Mooncake ErrorCode name, e.g. OBJECT_NOT_FOUND")
    message: str


class ErrorResponse(Strict):
    error: ErrorBody


# -- nested bodies ------------------------------------------------------------------------


class SegmentBody(Body):
    id: str = Field(max_length=256)
    name: str = Field(default="", max_length=1024)
    base: int = Field(default=0, ge=0)
    size: int
    te_endpoint: str = Field(default="", max_length=1024)
    protocol: str = Field(default="tcp", max_length=1024)

    def to_lib(self) -> Segment:
        return Segment(
            id=self.id,
            name=self.name or self.id,
            base=self.base,
            size=self.size,
            te_endpoint=self.te_endpoint,
            protocol=self.protocol,
        )


class ReplicateConfigBody(Body):
    replica_num: int = 1
    with_soft_pin: bool = False
    with_hard_pin: bool = False
    preferred_segments: list[str] = Field(default_factory=list, max_length=1024)
    preferred_segment: str = ""
    prefer_alloc_in_same_node: bool = False
    parent_block_hash: str = Field(default="", max_length=MAX_STR)

    def to_lib(self) -> ReplicateConfig:
        return ReplicateConfig.from_dict(self.model_dump())


class RegisterItemBody(Body):
    prefix_hash: str = Key
    parent_prefix_hash: str = Field(default="", max_length=MAX_STR)
    keys: list[str] = Keys

    def to_lib(self) -> RegisterItem:
        return RegisterItem(self.prefix_hash, self.parent_prefix_hash, list(self.keys))


# -- results -------------------------------------------------------------------------------


class ReplicaBody(Strict):
    replica_id: int
    status: str
    segment_id: str
    segment_name: str
    buffer_address: int
    size: int
    protocol: str
    transport_endpoint: str
    offset: int = 0


class ReplicaListBody(Strict):
    replicas: list[ReplicaBody]
    lease_ttl_ms: int


class PingBody(Strict):
    view_version_id: int
    client_status: str


class RadixNodeBody(Strict):
    prefix_hash: str
    parent_prefix_hash: str
    keys: list[str]
    children: list[str]
    is_shell: bool
    is_leaf: bool
    created_ms: int = 0
    score: float = 0.0
    hits: int = 0
    link_generation: int = 0
    child_generations: dict[str, int] = Field(default_factory=dict)


class SubtreeBody(Strict):
    root: str
    nodes: list[RadixNodeBody]
    keys: list[str]
    depth_reached: int
    truncated: bool


T = TypeVar("T")


class Result(Strict, Generic[T]):
    """A single RPC's answer: ``{"result": ...}``."""

    result: T


class ItemResult(Strict, Generic[T]):
    """One item of a batch: exactly one of ``result`` and ``error`` is present."""

    result: T | None = None
    error: ErrorBody | None = None


class BatchResult(Strict, Generic[T]):
    results: list[ItemResult[T]]


# -- requests -----------------------------------------------------------------------------


class MountSegmentRequest(Request):
    segment: SegmentBody
    client_id: str = Field(max_length=MAX_STR)


class RemountSegmentRequest(Request):
    segments: list[SegmentBody] = Field(max_length=MAX_BATCH)
    client_id: str = Field(max_length=MAX_STR)


class UnmountSegmentRequest(Request):
    segment_id: str = Field(max_length=256)
    client_id: str = Field(default="", max_length=MAX_STR)


class PutStartRequest(Request):
    client_id: str = Field(max_length=MAX_STR)
    key: str = Key
    slice_lengths: list[int] | int = Field(description="bytes per slice (or one size)")
    config: ReplicateConfigBody | None = None


class BatchPutStartRequest(Request):
    client_id: str = Field(max_length=MAX_STR)
    keys: list[str] = Keys
    slice_lengths: list[list[int] | int] = Keys
    config: ReplicateConfigBody | list[ReplicateConfigBody] | None = Field(
        default=None,
        description="one ReplicateConfig for every key, or a list with one per key",
    )


class PutKeyRequest(Request):
    client_id: str = Field(max_length=MAX_STR)
    key: str = Key
    replica_type: str = "MEMORY"


class BatchPutKeysRequest(Request):
    client_id: str = Field(max_length=MAX_STR)
    keys: list[str] = Keys
    replica_type: str = "MEMORY"


class KeyRequest(Request):
    key: str = Key


class KeysRequest(Request):
    keys: list[str] = Keys


class RemoveRequest(Request):
    key: str = Key
    force: bool = False


class BatchRemoveRequest(Request):
    keys: list[str] = Keys
    force: bool = False


class RemoveByRegexRequest(Request):
    pattern: str = Field(max_length=MAX_STR)
    force: bool = False


class RemoveAllRequest(Request):
    force: bool = False


class PingRequest(Request):
    client_id: str = Field(max_length=MAX_STR)


class RegisterRequest(Request):
    prefix_hash: str = Key
    parent_prefix_hash: str = Field(default="", max_length=MAX_STR)
    keys: list[str] = Keys


class BatchRegisterRequest(Request):
    items: list[RegisterItemBody] = Keys


class PrefixRequest(Request):
    prefix_hash: str = Key


class SubtreeRequest(Request):
    prefix_hash: str = Key
    max_depth: int = Field(default=16, ge=0, le=4096)


class EvictOnceRequest(Request):
    force: bool = False
    max_objects: int | None = Field(default=None, ge=0)
    target_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    wait: bool = True


class EvictionResultBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: str
    reason: str
    evicted_objects: int
    evicted_leaves: int
    bytes: int
    cascade_depth: int
