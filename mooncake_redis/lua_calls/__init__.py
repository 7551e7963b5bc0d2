"""The typed Python side of the Lua scripts: one wrapper per script, named arguments in, a
typed reply out, so no caller builds ARGV by position or reads a reply by index.

- :mod:`.globals`: scripts on the global tag (meta, ticks, pings, the segment registry, the
  evictor lease, the eviction flag);
- :mod:`.segment`: scripts on one segment's tag (mount, unmount steps);
- :mod:`.radix`: the radix index steps; :mod:`.store`: the object-store steps on shard tags.

Each wrapper's docstring names its script; the script's header is the contract it mirrors.
"""

from .globals import (
    META_FIELDS,
    ClientsExpired,
    LeaseReply,
    Meta,
    PingReply,
    TickReply,
    client_ping,
    clients_expired,
    clients_remove,
    evict_request,
    evictor_lease,
    meta_check,
    segment_deregister,
    segment_register,
    service_tick,
)
from .segment import (
    REFUSED,
    UNKNOWN,
    UNMOUNTING,
    MountReply,
    UnmountBegin,
    segment_mount,
    segment_unmount_begin,
    segment_unmount_end,
)
from .store import (
    AllocRef,
    Erased,
    Reclaimed,
    ReplicaList,
    Result,
    exist,
    get_replicas,
    janitor_shard,
    objects_complete,
    outbox_ack,
    outbox_peek,
    owner_check,
    put_end,
    put_revoke,
    remove,
    segment_drop,
)

__all__ = [
    "META_FIELDS",
    "REFUSED",
    "UNKNOWN",
    "UNMOUNTING",
    "AllocRef",
    "ClientsExpired",
    "Erased",
    "LeaseReply",
    "Meta",
    "MountReply",
    "PingReply",
    "Reclaimed",
    "ReplicaList",
    "Result",
    "TickReply",
    "UnmountBegin",
    "client_ping",
    "clients_expired",
    "clients_remove",
    "evict_request",
    "evictor_lease",
    "exist",
    "get_replicas",
    "janitor_shard",
    "meta_check",
    "objects_complete",
    "outbox_ack",
    "outbox_peek",
    "owner_check",
    "put_end",
    "put_revoke",
    "remove",
    "segment_deregister",
    "segment_drop",
    "segment_mount",
    "segment_register",
    "segment_unmount_begin",
    "segment_unmount_end",
    "service_tick",
]
