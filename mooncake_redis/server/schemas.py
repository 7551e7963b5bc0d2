"""Typed request and response bodies of the HTTP API, and the one table of RPCs.

Every RPC is one row of :data:`RPCS`: its request model (field names = the library method's
parameter names), the model of its result (for the OpenAPI document), how a library result
becomes JSON and back, and whether a client may safely send it twice. The server builds one
``POST /v1/<name>`` per row; the clients use the same rows. Adding an RPC is adding a row.

Request models are strict: unknown fields, wrong types and malformed JSON are INVALID_PARAMS.
Values the types allow but the semantics refuse (an empty key, replica_num 0) are checked by the
library and come back with its error code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ErrorCode, MooncakeError
from ..types import (
    EvictionResult,
    GetReplicaListResponse,
    PingResponse,
    RadixNode,
    RegisterItem,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
    SubtreeResult,
)

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


def error_body(exc: MooncakeError) -> dict[str, Any]:
    return {"code": int(exc.code), "name": exc.code.name, "message": exc.message}


def error_from_body(body: Mapping[str, Any]) -> MooncakeError:
    try:
        code: int = ErrorCode(int(body.get("code", -1)))
    except (TypeError, ValueError):
        code = ErrorCode.INTERNAL_ERROR
    return MooncakeError(code, str(body.get("message", "")))


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


# -- library result <-> JSON --------------------------------------------------------------


def node_to_json(node: RadixNode) -> dict[str, Any]:
    d = node.to_dict()
    d.update(
        created_ms=node.created_ms,
        score=node.score,
        hits=node.hits,
        link_generation=node.link_generation,
        child_generations=dict(node.child_generations),
    )
    return d


def node_from_json(d: Mapping[str, Any]) -> RadixNode:
    return RadixNode(
        prefix_hash=d["prefix_hash"],
        parent_prefix_hash=d.get("parent_prefix_hash", ""),
        keys=list(d.get("keys", [])),
        children=list(d.get("children", [])),
        created_ms=int(d.get("created_ms", 0)),
        score=float(d.get("score", 0.0)),
        hits=int(d.get("hits", 0)),
        link_generation=int(d.get("link_generation", 0)),
        child_generations={k: int(v) for k, v in d.get("child_generations", {}).items()},
    )


def subtree_to_json(sub: SubtreeResult) -> dict[str, Any]:
    d = sub.to_dict()
    d["nodes"] = [node_to_json(n) for n in sub.nodes.values()]
    return d


def subtree_from_json(d: Mapping[str, Any]) -> SubtreeResult:
    nodes = [node_from_json(n) for n in d.get("nodes", [])]
    return SubtreeResult(
        root=d["root"],
        nodes={n.prefix_hash: n for n in nodes},
        depth_reached=int(d.get("depth_reached", 0)),
        truncated=bool(d.get("truncated", False)),
    )


def _eviction_to_json(v: Any) -> Any:
    return v.to_dict(with_keys=False)


def _eviction_from_json(v: Any) -> Any:
    known = set(EvictionResult.__dataclass_fields__)
    return EvictionResult(**{k: x for k, x in v.items() if k in known})


def _same(v: Any) -> Any:
    return v


def _none(_: Any) -> None:
    return None


def _dict(v: Any) -> Any:
    return v.to_dict()


def _replicas_to_json(v: Any) -> Any:
    return [r.to_dict() for r in v]


def _replicas_from_json(v: Any) -> list[ReplicaDescriptor]:
    return [ReplicaDescriptor.from_dict(r) for r in v]


def _register_items(args: dict[str, Any]) -> dict[str, Any]:
    """``(prefix_hash, parent_prefix_hash, keys)`` tuples as RegisterItemBody objects."""
    items = [
        {"prefix_hash": i[0], "parent_prefix_hash": i[1], "keys": list(i[2])}
        if isinstance(i, (tuple, list)) and len(i) == 3
        else i
        for i in args["items"]
    ]
    return {**args, "items": items}


def _int(v: Any) -> int:
    return int(v)


def _bool(v: Any) -> bool:
    return bool(v)


@dataclass(frozen=True)
class Rpc:
    """One RPC: ``POST /v1/<name>`` calls ``MasterService.<name>(**request.to_kwargs())``."""

    name: str
    request: type[Request]
    result: Any  # the result's type, for the OpenAPI document
    to_json: Callable[[Any], Any] = _same  # library result (one item for batches) -> JSON
    from_json: Callable[[Any], Any] = _same  # JSON -> library result (client side)
    batch: bool = False  # the library returns list[T | MooncakeError]
    idempotent: bool = False  # safe to send again after it may have been applied
    summary: str = ""
    # Client side: library arguments -> what orjson can send (it does dataclasses, tuples and
    # dicts itself); only where the library accepts a shape the request model does not.
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def path(self) -> str:
        return f"/v1/{self.name}"

    @property
    def response_model(self) -> Any:
        return BatchResult[self.result] if self.batch else Result[self.result]  # type: ignore[name-defined]

    def encode(self, value: Any) -> dict[str, Any]:
        """The JSON body of a library result (a batch: one entry per item)."""
        if not self.batch:
            return {"result": self.to_json(value)}
        to_json = self.to_json
        if to_json is _none or to_json is _bool:  # the common batches: shared item objects
            items = [
                _OK.get(x) or ({"error": error_body(x)} if isinstance(x, MooncakeError)
                               else {"result": to_json(x)})
                for x in value
            ]  # fmt: skip
        else:
            items = [
                {"error": error_body(x)} if isinstance(x, MooncakeError) else {"result": to_json(x)}
                for x in value
            ]
        return {"results": items}

    def decode(self, body: Mapping[str, Any]) -> Any:
        """A library result from its JSON body (client side)."""
        if not self.batch:
            return self.from_json(body.get("result"))
        from_json = self.from_json
        return [
            error_from_body(item["error"]) if "error" in item else from_json(item.get("result"))
            for item in body.get("results", [])
        ]


# Success items of the None and bool batches, shared (orjson writes a dict as often as it is
# referenced). Keyed by identity-safe values only: None, True, False.
_OK: dict[Any, dict[str, Any]] = {
    None: {"result": None},
    True: {"result": True},
    False: {"result": False},
}


def count_errors(results: Iterable[Any]) -> int:
    return sum(map(isinstance, results, repeat(MooncakeError)))


_RPC_LIST: list[Rpc] = [
    # -- segments and clients ------------------------------------------------------------
    Rpc("mount_segment", MountSegmentRequest, None, _none, _none, idempotent=True,
        summary="MountSegment: register a client's buffer (idempotent)."),
    Rpc("remount_segment", RemountSegmentRequest, None, _none, _none, idempotent=True,
        summary="ReMountSegment: mount several segments again after NEED_REMOUNT."),
    Rpc("unmount_segment", UnmountSegmentRequest, None, _none, _none, idempotent=True,
        summary="UnmountSegment: drop a segment and every replica on it (unknown = OK)."),
    Rpc("ping", PingRequest, PingBody, _dict, PingResponse.from_dict, idempotent=True,
        summary="Ping: client heartbeat -> view version and client status."),
    # -- objects -------------------------------------------------------------------------
    Rpc("put_start", PutStartRequest, list[ReplicaBody], _replicas_to_json, _replicas_from_json,
        summary="PutStart: allocate replicas for a new object."),
    Rpc("put_end", PutKeyRequest, None, _none, _none, idempotent=True,
        summary="PutEnd: mark the object's replicas COMPLETE."),
    Rpc("put_revoke", PutKeyRequest, None, _none, _none,
        summary="PutRevoke: drop a put's PROCESSING replicas."),
    Rpc("batch_put_start", BatchPutStartRequest, list[ReplicaBody], _replicas_to_json,
        _replicas_from_json, batch=True, summary="BatchPutStart: one result per key."),
    Rpc("batch_put_end", BatchPutKeysRequest, None, _none, _none, batch=True, idempotent=True,
        summary="BatchPutEnd: one result per key."),
    Rpc("batch_put_revoke", BatchPutKeysRequest, None, _none, _none, batch=True,
        summary="BatchPutRevoke: one result per key."),
    Rpc("get_replica_list", KeyRequest, ReplicaListBody, _dict,
        GetReplicaListResponse.from_dict, idempotent=True,
        summary="GetReplicaList: COMPLETE replicas of a key; grants a lease."),
    Rpc("batch_get_replica_list", KeysRequest, ReplicaListBody, _dict,
        GetReplicaListResponse.from_dict, batch=True, idempotent=True,
        summary="BatchGetReplicaList: one result per key."),
    Rpc("exist_key", KeyRequest, bool, _bool, _bool, idempotent=True,
        summary="ExistKey: true only with a COMPLETE replica; a hit grants a lease."),
    Rpc("batch_exist_key", KeysRequest, bool, _bool, _bool, batch=True, idempotent=True,
        summary="BatchExistKey: one result per key."),
    Rpc("remove", RemoveRequest, None, _none, _none,
        summary="Remove: erase an object (OBJECT_HAS_LEASE unless force)."),
    Rpc("remove_by_regex", RemoveByRegexRequest, int, _int, _int,
        summary="RemoveByRegex: erase matching objects, skipping leased ones -> count."),
    Rpc("remove_all", RemoveAllRequest, int, _int, _int,
        summary="RemoveAll: erase every object, skipping leased ones -> count."),
    Rpc("batch_remove", BatchRemoveRequest, None, _none, _none, batch=True,
        summary="BatchRemove: one result per key."),
    # -- radix index ---------------------------------------------------------------------
    Rpc("register_radix_tree_node", RegisterRequest, None, _none, _none, idempotent=True,
        summary="RegisterRadixTreeNode: register keys under a prefix node (RFC Path B)."),
    Rpc("batch_register_radix_tree_node", BatchRegisterRequest, None, _none, _none, batch=True,
        idempotent=True, summary="BatchRegisterRadixTreeNode: one result per item.",
        prepare=_register_items),
    Rpc("get_keys_by_prefix", PrefixRequest, RadixNodeBody, node_to_json, node_from_json,
        idempotent=True, summary="GetKeysByPrefix: a node, its keys and children."),
    Rpc("get_subtree_keys", SubtreeRequest, SubtreeBody, subtree_to_json, subtree_from_json,
        idempotent=True, summary="Every node and key under a node, down to max_depth."),
    Rpc("unregister_radix_tree_keys", KeysRequest, int, _int, _int,
        summary="Remove keys from the index; empty nodes and shells cascade away -> count."),
    # -- eviction ------------------------------------------------------------------------
    Rpc("evict_once", EvictOnceRequest, EvictionResultBody, _eviction_to_json,
        _eviction_from_json, summary="One eviction pass now (takes the evictor lease)."),
]  # fmt: skip

RPCS: dict[str, Rpc] = {rpc.name: rpc for rpc in _RPC_LIST}

# HTTP status for each error code; anything unlisted is 400 if it is a caller's mistake.
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.OK: 200,
    ErrorCode.INTERNAL_ERROR: 500,
    ErrorCode.BUFFER_OVERFLOW: 400,
    ErrorCode.SHARD_INDEX_OUT_OF_RANGE: 400,
    ErrorCode.SEGMENT_NOT_FOUND: 404,
    ErrorCode.SEGMENT_ALREADY_EXISTS: 409,
    ErrorCode.CLIENT_NOT_FOUND: 404,
    ErrorCode.NO_AVAILABLE_HANDLE: 507,
    ErrorCode.INVALID_VERSION: 409,
    ErrorCode.INVALID_KEY: 400,
    ErrorCode.WRITE_FAIL: 500,
    ErrorCode.INVALID_PARAMS: 400,
    ErrorCode.ILLEGAL_CLIENT: 403,
    ErrorCode.INVALID_WRITE: 409,
    ErrorCode.INVALID_READ: 409,
    ErrorCode.INVALID_REPLICA: 409,
    ErrorCode.REPLICA_IS_NOT_READY: 409,
    ErrorCode.OBJECT_NOT_FOUND: 404,
    ErrorCode.OBJECT_ALREADY_EXISTS: 409,
    ErrorCode.OBJECT_HAS_LEASE: 409,
    ErrorCode.LEASE_EXPIRED: 409,
    ErrorCode.OBJECT_HAS_REPLICATION_TASK: 409,
    ErrorCode.REPLICA_NOT_FOUND: 404,
    ErrorCode.REPLICA_ALREADY_EXISTS: 409,
    ErrorCode.TRANSFER_FAIL: 502,
    ErrorCode.RPC_FAIL: 503,
    ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS: 503,
    ErrorCode.UNAVAILABLE_IN_CURRENT_MODE: 503,
}


def http_status(code: ErrorCode) -> int:
    return HTTP_STATUS.get(code, 400)
