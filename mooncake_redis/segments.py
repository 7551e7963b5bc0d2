"""Segment lifecycle and clients: mount, remount, unmount, stats, ping.

Unmount drops replicas in other shards before the allocator goes, so it is resumable: a crash
leaves the segment unmounted-but-present and the janitor finishes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from .allocation import AllocationMixin
from .errors import ErrorCode, MooncakeError
from .models import PingResponse, Segment, SegmentStats, check_segment
from .prefix import check_str
from .records import FreePair, _s, from_u64hex, parse_alloc_record, u64hex
from .service_base import ShardItem


class SegmentsMixin(AllocationMixin):
    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        """MountSegment: idempotent (an already mounted segment is left as it is)."""
        seg = check_segment(segment)
        anchor = self.keys.segment_anchor(seg.id)  # validates the id
        client = check_str("client_id", client_id, self.config.max_key_length)
        g = self.keys.global_key
        code, msg = await self.backend.call(
            "segment_register",
            [g("segments"), g("clients"), g("expiring"), g("heartbeat")],
            [seg.id, client, self.config.heartbeat_gap],
        )
        if int(code) != 0:
            raise MooncakeError(int(code), f"segment {seg.id}: {_s(msg)}")
        await self.checkpoint("mount:registered")
        code, msg, owner = await self.backend.call(
            "segment_mount",
            [anchor],
            [seg.name, u64hex(seg.base), u64hex(seg.size), seg.te_endpoint, seg.protocol, client],
        )
        self._segments_changed()
        if int(code) != 0:
            raise MooncakeError(int(code), f"segment {seg.id}: {_s(msg)}")
        if _s(owner) != client:  # mounted earlier by another client: keep its registry entry
            await self.backend.command("HSET", g("segments"), seg.id, _s(owner))

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        """ReMountSegment: mounts each (idempotently), e.g. after Ping said NEED_REMOUNT.
        Every segment and the client id are checked before anything is written, so a rejected
        call changes nothing."""
        check_str("client_id", client_id, self.config.max_key_length)
        checked = [check_segment(s) for s in segments]
        for seg in checked:
            self.keys.segment_anchor(seg.id)  # raises INVALID_PARAMS for a bad id
        await asyncio.gather(*(self.mount_segment(s, client_id) for s in checked))

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        """UnmountSegment: drops every replica on the segment (objects left without a replica are
        erased and unregistered). An unknown segment is OK. Mooncake lets any caller unmount any
        segment; with ``unmount_check_owner`` only the client that mounted it may
        (ILLEGAL_CLIENT otherwise, including an empty client id)."""
        check = self.config.unmount_check_owner
        if check:  # an empty id is refused by the owner check itself
            check_str("client_id", client_id, self.config.max_key_length, allow_empty=True)
        await self._unmount(segment_id, client_id, check)

    async def _unmount(self, segment_id: str, client_id: str = "", check: bool = False) -> None:
        anchor = self.keys.segment_anchor(segment_id)
        found, owner = await self.backend.call(
            "segment_unmount_begin", [anchor], [client_id, 1 if check else 0]
        )
        self._segments_changed()
        if int(found) == 2:
            raise MooncakeError(
                ErrorCode.ILLEGAL_CLIENT,
                f"client_id: segment {segment_id} was mounted by another client",
            )
        if int(found) == 0:
            await self.backend.call(
                "segment_deregister", [self.keys.global_key("segments")], [segment_id, ""]
            )
            return
        await self.checkpoint("unmount:begun")
        await self._finish_unmount(segment_id, _s(owner))

    async def _finish_unmount(self, segment_id: str, owner: str) -> None:
        alloc_key = self.keys.segment_key(segment_id, "alloc")
        cursor: Any = 0
        while True:
            cursor, data = await self.backend.client.hscan(
                alloc_key, cursor, count=self.config.script_batch_size
            )
            items: list[ShardItem] = []
            for off, rec in data.items():
                _, pid, _, key = parse_alloc_record(_s(rec))
                items.append((self.shard_of_key(key), [key, segment_id, _s(off), pid]))
            conts: list[Any] = []
            frees: list[FreePair] = []
            for _, (_d, _e, cs, fs) in await self.run_sharded("segment_drop", items):
                conts.extend(cs)
                frees.extend((int(sh), _s(e)) for sh, e in fs)
            await self.finish_unlinks(conts)
            await self.apply_frees(frees)
            if int(cursor) == 0:
                break
        await self.checkpoint("unmount:dropped")
        await self.backend.call("segment_unmount_end", [self.keys.segment_anchor(segment_id)], [])
        await self.backend.call(
            "segment_deregister", [self.keys.global_key("segments")], [segment_id, owner]
        )
        self._segments_changed()

    async def segment_stats(self, segment_ids: Sequence[str] | None = None) -> list[SegmentStats]:
        """Per registered segment: size, allocated bytes (cheap to sum for the used ratio)."""
        ids = list(segment_ids) if segment_ids is not None else await self._segment_ids(True)
        out: dict[str, SegmentStats] = {}
        for part, reply in await self._segment_groups("segment_info", [(s, []) for s in ids]):
            for j, row in zip(part, reply):
                if not row:
                    continue
                f = [None if x is None else _s(x) for x in row]
                out[ids[j]] = SegmentStats(
                    id=ids[j],
                    name=f[0] or "",
                    client_id=f[5] or "",
                    size=from_u64hex(f[2] or "0"),
                    allocated=from_u64hex(f[6] or "0"),
                    mounted=f[7] == "1",
                    allocations=int(f[8] or 0),
                    pending=int(f[9] or 0),
                )
        return [out[s] for s in ids if s in out]

    async def used_ratio(self) -> float:
        stats = [s for s in await self.segment_stats() if s.mounted]
        cap = sum(s.size for s in stats)
        return sum(s.allocated for s in stats) / cap if cap else 0.0

    # ------------------------------------------------------------------ clients
    async def ping(self, client_id: str) -> PingResponse:
        """Ping: OK for a known client (its clock is refreshed, however long it was silent: only
        the janitor expires, from heard time), NEED_REMOUNT for an unknown or expired one."""
        client = check_str("client_id", client_id, self.config.max_key_length)
        g = self.keys.global_key
        view, status, *recorded = await self.backend.call(
            "client_ping",
            [g("clients"), g("meta"), g("heartbeat")],
            [client, *self.meta_argv(), self.config.heartbeat_gap],
        )
        self.compare_meta(recorded)
        return PingResponse(int(_s(view)), _s(status))
