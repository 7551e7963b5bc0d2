"""Every Mooncake type the master's RPCs carry, declared once, in C++ declaration order.

Names follow Mooncake's headers (``mooncake-store/include/types.h``, ``rpc_types.h``,
``replica.h``, ``allocator.h``; the C++ name is in each docstring where it differs). Field
types are written as struct_pack sees them: enums are their underlying integers. The wire
literal and hash of every type come from these declarations (``structpack.wire_type``), so a
field added upstream is one line here and every hash follows.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

from .declare import INT_TYPES, trivial

i32 = Annotated[int, INT_TYPES["i32"]]
u32 = Annotated[int, INT_TYPES["u32"]]
i64 = Annotated[int, INT_TYPES["i64"]]
u64 = Annotated[int, INT_TYPES["u64"]]
u8 = Annotated[int, INT_TYPES["u8"]]

# Enum values (their C++ underlying types are in the field annotations).
REPLICA_STATUS = {"UNDEFINED": 0, "INITIALIZED": 1, "PROCESSING": 2, "COMPLETE": 3}
CLIENT_STATUS = {"UNDEFINED": 0, "OK": 1, "NEED_REMOUNT": 2}
REPLICA_TYPE_MEMORY, REPLICA_TYPE_ALL = 0, 4  # ReplicaType (int): the ones a memory put uses
SOFT_PIN_PRESERVE, SOFT_PIN_ENABLE, SOFT_PIN_DISABLE = 0, 1, 2  # SoftPinAction (uint8_t)


@trivial(8, 8)
class UUID(NamedTuple):
    """``using UUID = std::pair<uint64_t, uint64_t>``: trivially serializable (memcpy)."""

    first: u64
    second: u64


class Segment(NamedTuple):
    id: UUID
    name: str
    base: u64  # uintptr_t
    size: u64  # size_t
    te_endpoint: str
    protocol: str
    host_id: str


class ReplicateConfig(NamedTuple):
    replica_num: u64 = 1
    nof_replica_num: u64 = 0
    dfs_replica_num: u64 = 0
    soft_pin_action: u8 = SOFT_PIN_PRESERVE  # SoftPinAction
    soft_pin_ttl_ms: u64 | None = None
    with_hard_pin: bool = False
    preferred_segments: list[str] = []
    preferred_segment: str = ""
    preferred_nof_segments: list[str] = []
    prefer_alloc_in_same_node: bool = False
    data_type: u8 = 0  # ObjectDataType
    host_id: str = ""
    group_ids: list[str] | None = None


class BufferDescriptor(NamedTuple):
    """``AllocatedBuffer::Descriptor``."""

    size: u64
    buffer_address: u64
    protocol: str
    transport_endpoint: str


class MemoryDescriptor(NamedTuple):
    buffer_descriptor: BufferDescriptor


class NoFDescriptor(NamedTuple):
    buffer_descriptor: BufferDescriptor


class DiskDescriptor(NamedTuple):
    file_path: str
    object_size: u64


class LocalDiskDescriptor(NamedTuple):
    client_id: UUID
    object_size: u64
    transport_endpoint: str


class DistributedFSDescriptor(NamedTuple):
    file_path: str
    offset: u64
    object_size: u64
    aligned_size: u64
    shard_idx: i32


class ReplicaDescriptor(NamedTuple):
    """``Replica::Descriptor``."""

    id: u64  # ReplicaID
    descriptor_variant: (
        MemoryDescriptor
        | NoFDescriptor
        | DiskDescriptor
        | LocalDiskDescriptor
        | DistributedFSDescriptor
    )
    status: i32  # ReplicaStatus


class GetReplicaListResponse(NamedTuple):
    replicas: list[ReplicaDescriptor]
    lease_ttl_ms: u64
    object_checksum: u64 | None = None


class PingResponse(NamedTuple):
    view_version_id: i64  # ViewVersionId
    client_status: i32  # ClientStatus


class GetStorageConfigResponse(NamedTuple):
    fsdir: str
    enable_disk_eviction: bool
    quota_bytes: u64


class ObjectMeta(NamedTuple):
    key: str
    object_checksum: u64 | None = None


class TaskAssignment(NamedTuple):
    id: UUID
    type: i32  # TaskType
    payload: str
    created_at_ms_epoch: i64
    max_retry_attempts: u32
