"""Wrappers of the scripts on one segment's tag ``{<ns>:s:<segment id>}``."""

from __future__ import annotations

from typing import NamedTuple

from ..context import Context
from ..records import _s, u64hex


class MountReply(NamedTuple):
    code: int
    message: str
    owner: str  # the client id of the mounted segment (another one: mounted earlier by it)


class UnmountBegin(NamedTuple):
    state: int  # 0 unknown segment, 1 unmounting, 2 refused (another client's segment)
    owner: str


UNKNOWN, UNMOUNTING, REFUSED = 0, 1, 2


async def segment_mount(
    ctx: Context,
    segment_id: str,
    *,
    name: str,
    base: int,
    size: int,
    te_endpoint: str,
    protocol: str,
    client_id: str,
) -> MountReply:
    """``segment_mount``: creates the allocator (idempotent)."""
    code, msg, owner = await ctx.backend.call(
        "segment_mount",
        [ctx.keys.segment_anchor(segment_id)],
        [name, u64hex(base), u64hex(size), te_endpoint, protocol, client_id],
    )
    return MountReply(int(code), _s(msg), _s(owner))


async def segment_unmount_begin(
    ctx: Context, segment_id: str, client_id: str, check_owner: bool
) -> UnmountBegin:
    """``segment_unmount_begin``: the segment stops allocating."""
    state, owner = await ctx.backend.call(
        "segment_unmount_begin",
        [ctx.keys.segment_anchor(segment_id)],
        [client_id, 1 if check_owner else 0],
    )
    return UnmountBegin(int(state), _s(owner))


async def segment_unmount_end(ctx: Context, segment_id: str) -> bool:
    """``segment_unmount_end``: deletes the allocator of an unmounting segment."""
    done = await ctx.backend.call("segment_unmount_end", [ctx.keys.segment_anchor(segment_id)], [])
    return bool(int(done))
