"""Segment lifecycle and clients: mount, remount, unmount, stats, ping.

Unmount drops replicas in other shards before the allocator goes, so it is resumable: a crash
leaves the segment unmounted-but-present and the janitor finishes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import lua_calls as lua
from .allocation import Allocator, segment_records
from .context import Context
from .errors import ErrorCode, MooncakeError
from .models import PingResponse, Segment, SegmentStats, check_segment
from .namespace import Namespace
from .prefix import check_str
from .radix import RadixIndex
from .records import u64hex


@dataclass(frozen=True)
class Usage:
    """Allocated bytes and capacity over mounted segments. ``segments``: the registered segment
    ids it was read over (an eviction pass re-reads those between rounds, not the registry)."""

    allocated: int
    capacity: int
    segments: tuple[str, ...] = ()
    pending: lua.Pending | None = field(default=None, compare=False)
    """what eviction left pending, read in the same call (a single Redis; None: not read): a
    pass started from this read needs no read of its own (not part of the usage's value)"""

    @property
    def ratio(self) -> float:
        return self.allocated / self.capacity if self.capacity else 0.0

    @classmethod
    def over(
        cls,
        ids: Sequence[str],
        found: Sequence[SegmentStats | None],
        pending: lua.Pending | None = None,
    ) -> Usage:
        """The usage over ``ids`` from their stats as read (``found``, in ``ids`` order):
        mounted segments only."""
        stats = [s for s in found if s is not None and s.mounted]
        allocated, capacity = sum(s.allocated for s in stats), sum(s.size for s in stats)
        return cls(allocated, capacity, tuple(ids), pending)


class Segments:
    """Segment lifecycle and client pings, over the allocators and the radix index (unmounts
    unregister what they drop)."""

    def __init__(
        self, ctx: Context, namespace: Namespace, radix: RadixIndex, allocator: Allocator
    ) -> None:
        self.ctx = ctx
        self.namespace = namespace
        self.radix = radix
        self.allocator = allocator

    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        """MountSegment: idempotent (an already mounted segment is left as it is)."""
        seg = check_segment(segment)
        self.ctx.keys.segment_anchor(seg.id)  # validates the id
        client = check_str("client_id", client_id, self.ctx.config.max_key_length)
        code, msg = await lua.segment_register(self.ctx, seg.id, client)
        if code != 0:
            raise MooncakeError(code, f"segment {seg.id}: {msg}")
        await self.ctx.checkpoint("mount:registered")
        mounted = await lua.segment_mount(
            self.ctx,
            seg.id,
            name=seg.name,
            base=seg.base,
            size=seg.size,
            te_endpoint=seg.te_endpoint,
            protocol=seg.protocol,
            client_id=client,
        )
        self.allocator.segments_changed()
        if mounted.code != 0:
            raise MooncakeError(mounted.code, f"segment {seg.id}: {mounted.message}")
        if mounted.owner != client:  # mounted earlier by another client: keep its registry entry
            await self.ctx.backend.command(
                "HSET", self.ctx.keys.global_key("segments"), seg.id, mounted.owner
            )

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        """ReMountSegment: mounts each (idempotently), e.g. after Ping said NEED_REMOUNT.
        Every segment and the client id are checked before anything is written, so a rejected
        call changes nothing."""
        check_str("client_id", client_id, self.ctx.config.max_key_length)
        checked = [check_segment(s) for s in segments]
        for seg in checked:
            self.ctx.keys.segment_anchor(seg.id)  # raises INVALID_PARAMS for a bad id
        await asyncio.gather(*(self.mount_segment(s, client_id) for s in checked))

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        """UnmountSegment: drops every replica on the segment (objects left without a replica are
        erased and unregistered). An unknown segment is OK. Mooncake lets any caller unmount any
        segment; with ``unmount_check_owner`` only the client that mounted it may
        (ILLEGAL_CLIENT otherwise, including an empty client id)."""
        check = self.ctx.config.unmount_check_owner
        if check:  # an empty id is refused by the owner check itself
            check_str("client_id", client_id, self.ctx.config.max_key_length, allow_empty=True)
        await self.unmount(segment_id, client_id, check)

    async def unmount(self, segment_id: str, client_id: str = "", check: bool = False) -> None:
        begun = await lua.segment_unmount_begin(self.ctx, segment_id, client_id, check)
        self.allocator.segments_changed()
        if begun.state == lua.REFUSED:
            raise MooncakeError(
                ErrorCode.ILLEGAL_CLIENT,
                f"client_id: segment {segment_id} was mounted by another client",
            )
        if begun.state == lua.UNKNOWN:
            await lua.segment_deregister(self.ctx, segment_id)
            return
        await self.ctx.checkpoint("unmount:begun")
        await self.finish_unmount(segment_id, begun.owner)

    async def finish_unmount(self, segment_id: str, owner: str) -> None:
        # A page of record buckets (64 records each for one object size) per segment_drop.
        async for page in segment_records(
            self.ctx.backend,
            self.ctx.keys,
            segment_id,
            max(1, self.ctx.config.script_batch_size // 64),
        ):
            refs = [
                lua.AllocRef(rec.owner, segment_id, u64hex(off), rec.put_id)
                for off, rec in page.items()
            ]
            dropped = await lua.segment_drop(self.ctx, refs)
            await self.radix.finish_unlinks(dropped.continuations)
            await self.allocator.apply_frees(dropped.frees)
        await self.ctx.checkpoint("unmount:dropped")
        await lua.segment_unmount_end(self.ctx, segment_id)
        await lua.segment_deregister(self.ctx, segment_id, owner)
        self.allocator.segments_changed()

    async def segment_stats(self, segment_ids: Sequence[str] | None = None) -> list[SegmentStats]:
        """Per registered segment: size, allocated bytes (cheap to sum for the used ratio)."""
        ids = (
            list(segment_ids) if segment_ids is not None else await self.allocator.segment_ids(True)
        )
        return [st for st in await lua.segment_info(self.ctx, ids) if st is not None]

    async def usage(self, segment_ids: Sequence[str] | None = None) -> Usage:
        """Allocated bytes and capacity over the mounted segments (the one used ratio); over
        ``segment_ids`` when given (else every registered one, the registry read first; on a
        single Redis in the same call, with what eviction left pending)."""
        if segment_ids is None and not self.ctx.backend.cluster:
            read = await lua.segment_usage(self.ctx)
            self.allocator.note_segment_ids(read.ids)
            return Usage.over(read.ids, read.stats, read.pending)
        if segment_ids is None:
            segment_ids = await self.allocator.segment_ids(True)
        return Usage.over(segment_ids, await self.segment_stats(segment_ids))

    async def used_ratio(self) -> float:
        return (await self.usage()).ratio

    # ------------------------------------------------------------------ clients
    async def ping(self, client_id: str) -> PingResponse:
        """Ping: OK for a known client (its clock is refreshed, however long it was silent: only
        the janitor expires, from heard time), NEED_REMOUNT for an unknown or expired one."""
        client = check_str("client_id", client_id, self.ctx.config.max_key_length)
        reply = await lua.client_ping(self.ctx, client, self.namespace.meta())
        self.namespace.compare(reply.recorded)
        return PingResponse(reply.view_version, reply.status)
