"""The RPCs of ``mooncake::WrappedMasterService`` (``rpc_service.h``; 64 registered by
``mooncake_master`` 0.3.13.post1): function ids computed from their names, and the argument and
result types of the ones this front end serves.

Function id = ``MD5("mooncake::WrappedMasterService::<Name>")[:4]`` read big-endian (coro_rpc's
``MD5Hash32Constexpr`` of the function's qualified name), sent little-endian.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codec import Codec
from .declare import args_type, wire_type
from .structpack import Expected, Vector, WireType, md5_hash32
from .types import (
    UUID,
    GetReplicaListResponse,
    GetStorageConfigResponse,
    ObjectMeta,
    PingResponse,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
    TaskAssignment,
    i32,
    i64,
    u64,
)

QUALIFIER = "mooncake::WrappedMasterService::"

# Every handler the real master registers (names from the binary's strings).
REGISTERED = (
    "BatchEvictDiskReplica",
    "BatchExistKey",
    "BatchGetReplicaList",
    "BatchPutEnd",
    "BatchPutRevoke",
    "BatchPutStart",
    "BatchQueryIp",
    "BatchRemove",
    "BatchReplicaClear",
    "BatchUpsertEnd",
    "BatchUpsertRevoke",
    "BatchUpsertStart",
    "CopyEnd",
    "CopyRevoke",
    "CopyStart",
    "CreateCopyTask",
    "CreateMoveTask",
    "DynamicReplicaCopyEnd",
    "DynamicReplicaCopyRevoke",
    "DynamicReplicaCopyStart",
    "EvictDiskReplica",
    "ExistKey",
    "FetchTasks",
    "GetAllNoFSegments",
    "GetFsdir",
    "GetNoFSegmentsByName",
    "GetReplicaList",
    "GetReplicaListByRegex",
    "GetStorageConfig",
    "GracefulUnmountSegment",
    "MarkTaskToComplete",
    "MountLocalDiskSegment",
    "MountNoFSegment",
    "MountSegment",
    "MoveEnd",
    "MoveRevoke",
    "MoveStart",
    "NotifyOffloadSuccess",
    "NotifyPromotionFailure",
    "NotifyPromotionSuccess",
    "OffloadObjectHeartbeat",
    "Ping",
    "PollRemoveAll",
    "PromotionAllocStart",
    "PromotionObjectHeartbeat",
    "PutEnd",
    "PutRevoke",
    "PutStart",
    "QuerySegmentStatus",
    "QuerySegmentStatusById",
    "QueryTask",
    "ReMountNoFSegment",
    "ReMountSegment",
    "Remove",
    "RemoveAll",
    "RemoveByRegex",
    "ReportSsdCapacity",
    "ServiceReady",
    "UnmountLocalDiskSegment",
    "UnmountNoFSegment",
    "UnmountSegment",
    "UpsertEnd",
    "UpsertRevoke",
    "UpsertStart",
)


def function_id(name: str) -> int:
    return md5_hash32((QUALIFIER + name).encode())


@dataclass(frozen=True)
class RpcType:
    """One RPC's argument list and result: codecs compiled on first use."""

    name: str
    args: tuple[Any, ...]
    result: Any
    fid: int = field(init=False)
    request: Codec | None = field(init=False)
    response: Codec = field(init=False)

    def __post_init__(self) -> None:
        req: WireType | None = args_type(self.args)
        object.__setattr__(self, "fid", function_id(self.name))
        object.__setattr__(self, "request", Codec(req) if req is not None else None)
        object.__setattr__(self, "response", Codec(wire_type(self.result)))


def _e(annotation: Any) -> Expected:
    """``tl::expected<T, ErrorCode>``."""
    return Expected(wire_type(annotation))


_void = _e(None)
_descs = list[ReplicaDescriptor]
_keys = list[str]
_tenant = str

SIGNATURES: dict[str, tuple[tuple[Any, ...], Any]] = {
    # setup and liveness
    "ServiceReady": ((), _e(str)),
    "GetStorageConfig": ((), _e(GetStorageConfigResponse)),
    "GetFsdir": ((), _e(str)),
    "MountSegment": ((Segment, UUID), _void),
    "ReMountSegment": ((list[Segment], UUID), _void),
    "UnmountSegment": ((UUID, UUID), _void),
    "Ping": ((UUID,), _e(PingResponse)),
    "FetchTasks": ((UUID, u64), _e(list[TaskAssignment])),
    # reads
    "ExistKey": ((str, _tenant), _e(bool)),
    "BatchExistKey": ((_keys, _tenant), Vector(_e(bool))),
    "GetReplicaList": ((str, _tenant), _e(GetReplicaListResponse)),
    "BatchGetReplicaList": ((_keys, _tenant), Vector(_e(GetReplicaListResponse))),
    "GetReplicaListByRegex": ((str, _tenant), _e(dict[str, _descs])),
    # puts
    "PutStart": ((UUID, str, u64, ReplicateConfig, _tenant), _e(_descs)),
    "PutEnd": ((UUID, ObjectMeta, i32, _tenant), _void),
    "PutRevoke": ((UUID, str, i32, _tenant), _void),
    "BatchPutStart": ((UUID, _keys, list[u64], ReplicateConfig, _tenant), Vector(_e(_descs))),
    "BatchPutEnd": ((UUID, list[ObjectMeta], i32, _tenant), Vector(_void)),
    "BatchPutRevoke": ((UUID, _keys, i32, _tenant), Vector(_void)),
    # upserts (answered, not yet served: see frontend.py)
    "UpsertStart": ((UUID, str, u64, ReplicateConfig, _tenant), _e(_descs)),
    "UpsertEnd": ((UUID, ObjectMeta, i32, _tenant), _void),
    "UpsertRevoke": ((UUID, str, i32, _tenant), _void),
    "BatchUpsertStart": ((UUID, _keys, list[u64], ReplicateConfig, _tenant), Vector(_e(_descs))),
    "BatchUpsertEnd": ((UUID, list[ObjectMeta], _tenant), Vector(_void)),
    "BatchUpsertRevoke": ((UUID, _keys, _tenant), Vector(_void)),
    # removal
    "Remove": ((str, bool, _tenant), _void),
    "BatchRemove": ((_keys, bool, _tenant), Vector(_void)),
    "RemoveByRegex": ((str, bool, _tenant), _e(i64)),
    "RemoveAll": ((bool, _tenant), i64),  # a plain long, not an expected
}

RPCS: dict[str, RpcType] = {name: RpcType(name, *sig) for name, sig in SIGNATURES.items()}
BY_FID: dict[int, RpcType] = {r.fid: r for r in RPCS.values()}
NAME_OF_FID: dict[int, str] = {function_id(n): n for n in (*REGISTERED, "CalcCacheStats")}
