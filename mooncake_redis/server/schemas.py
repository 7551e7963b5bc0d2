"""The one table of RPCs (:data:`RPCS`) and how results travel as JSON; the bodies themselves
are in :mod:`.bodies` (re-exported here).

Every RPC is one row of :data:`RPCS`: its request model (field names = the library method's
parameter names), the model of its result (for the OpenAPI document), how a library result
becomes JSON and back, and whether a client may safely send it twice. The server builds one
``POST /v1/<name>`` per row; the clients use the same rows. Adding an RPC is adding a row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from ..errors import ErrorCode, MooncakeError
from ..types import (
    EvictionResult,
    GetReplicaListResponse,
    PingResponse,
    RadixNode,
    ReplicaDescriptor,
    SubtreeResult,
)
from .bodies import (
    MAX_BATCH,
    MAX_STR,
    BatchPutKeysRequest,
    BatchPutStartRequest,
    BatchRegisterRequest,
    BatchRemoveRequest,
    BatchResult,
    Body,
    ErrorBody,
    ErrorResponse,
    EvictionResultBody,
    EvictOnceRequest,
    ItemResult,
    KeyRequest,
    KeysRequest,
    MountSegmentRequest,
    PingBody,
    PingRequest,
    PrefixRequest,
    PutKeyRequest,
    PutStartRequest,
    RadixNodeBody,
    RegisterItemBody,
    RegisterRequest,
    RemountSegmentRequest,
    RemoveAllRequest,
    RemoveByRegexRequest,
    RemoveRequest,
    ReplicaBody,
    ReplicaListBody,
    ReplicateConfigBody,
    Request,
    Result,
    SegmentBody,
    Strict,
    SubtreeBody,
    SubtreeRequest,
    UnmountSegmentRequest,
)

__all__ = [
    "HTTP_STATUS",
    "MAX_BATCH",
    "MAX_STR",
    "RPCS",
    "BatchResult",
    "Body",
    "ErrorBody",
    "ErrorResponse",
    "ItemResult",
    "RegisterItemBody",
    "ReplicateConfigBody",
    "Request",
    "Result",
    "Rpc",
    "SegmentBody",
    "Strict",
    "count_errors",
    "error_body",
    "error_from_body",
    "http_status",
    "node_from_json",
    "node_to_json",
    "subtree_from_json",
    "subtree_to_json",
]

# -- errors --------------------------------------------------------------------------------


def error_body(exc: MooncakeError) -> dict[str, Any]:
    return {"code": int(exc.code), "name": exc.code.name, "message": exc.message}


def error_from_body(body: Mapping[str, Any]) -> MooncakeError:
    try:
        code: int = ErrorCode(int(body.get("code", -1)))
    except (TypeError, ValueError):
        code = ErrorCode.INTERNAL_ERROR
    return MooncakeError(code, str(body.get("message", "")))


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
    Rpc("upsert_start", PutStartRequest, list[ReplicaBody], _replicas_to_json,
        _replicas_from_json, summary="UpsertStart: a put, or new data for an existing key."),
    Rpc("upsert_end", PutKeyRequest, None, _none, _none, idempotent=True,
        summary="UpsertEnd: as PutEnd."),
    Rpc("upsert_revoke", PutKeyRequest, None, _none, _none,
        summary="UpsertRevoke: as PutRevoke (the object goes)."),
    Rpc("batch_upsert_start", BatchPutStartRequest, list[ReplicaBody], _replicas_to_json,
        _replicas_from_json, batch=True, summary="BatchUpsertStart: one result per key."),
    Rpc("batch_upsert_end", BatchPutKeysRequest, None, _none, _none, batch=True,
        idempotent=True, summary="BatchUpsertEnd: one result per key."),
    Rpc("batch_upsert_revoke", BatchPutKeysRequest, None, _none, _none, batch=True,
        summary="BatchUpsertRevoke: one result per key."),
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
