"""The typed Python side of the Lua scripts: one wrapper per script, named arguments in, a
typed reply out, so no caller builds ARGV by position or reads a reply by index.

- :mod:`.globals`: scripts on the global tag (meta, ticks, pings, the segment registry, the
  evictor lease, the eviction flag);
- :mod:`.segment`: scripts on one segment's tag (mount, unmount steps).

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

__all__ = [
    "META_FIELDS",
    "REFUSED",
    "UNKNOWN",
    "UNMOUNTING",
    "ClientsExpired",
    "LeaseReply",
    "Meta",
    "MountReply",
    "PingReply",
    "TickReply",
    "UnmountBegin",
    "client_ping",
    "clients_expired",
    "clients_remove",
    "evict_request",
    "evictor_lease",
    "meta_check",
    "segment_deregister",
    "segment_mount",
    "segment_register",
    "segment_unmount_begin",
    "segment_unmount_end",
    "service_tick",
]
