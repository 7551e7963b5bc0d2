"""The janitor: reclaims what crashes and silent clients leave behind.

Expired clients, half-done unmounts, stale puts, unconfirmed allocations, undrained outboxes.
Every step is safe to run concurrently with itself, so any worker may run it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from . import lua_calls as lua
from .allocation import Allocator
from .context import Context
from .namespace import Namespace
from .radix import RadixIndex
from .segments import Segments


@dataclass
class JanitorReport:
    ran: bool = True
    expired_clients: int = 0
    unmounted_segments: int = 0
    discarded_puts: int = 0
    released_buffers: int = 0
    confirmed_allocations: int = 0
    reclaimed_allocations: int = 0
    drained_frees: int = 0


class Janitor:
    """The service's tick and the reclaim steps; any worker may run them (see the module)."""

    def __init__(
        self,
        ctx: Context,
        namespace: Namespace,
        radix: RadixIndex,
        allocator: Allocator,
        segments: Segments,
    ) -> None:
        self.ctx = ctx
        self.namespace = namespace
        self.radix = radix
        self.allocator = allocator
        self.segments = segments

    async def heartbeat(self, hearing: bool | None = None, janitor_turn: bool = False) -> bool:
        """The service's tick (every worker's janitor loop or evictor loop, about once per
        janitor interval): records that the service hears (unless ``hearing`` is False: a
        standalone evictor hears no client), records the namespace meta again if Redis lost it,
        and refuses to go on when another process recorded other settings. With
        ``janitor_turn``: whether this call won the janitor's turn (one run per interval)."""
        hear = self.ctx.hears_clients if hearing is None else hearing
        c = self.ctx.config
        tick = await lua.service_tick(
            self.ctx,
            self.namespace.meta(),
            hearing=hear,
            janitor_interval_ms=c.janitor_interval_ms if janitor_turn else 0,
            token=uuid.uuid4().hex,
        )
        self.namespace.compare(tick.recorded)
        return tick.turn

    async def run_janitor_once(
        self, force: bool = False, hearing: bool | None = None
    ) -> JanitorReport:
        """A heartbeat, then client expiry, unfinished unmounts, stale puts, pending
        allocations, outbox drain. At most once per ``janitor_interval_ms`` across all workers
        (SET NX PX on the global janitor key) unless ``force``. Every step is safe to run
        concurrently with itself."""
        turn = await self.heartbeat(hearing, janitor_turn=not force)
        if not force and not turn:
            return JanitorReport(ran=False)
        rep = JanitorReport()
        await self.expire_clients(rep)
        await self.resume_unmounts(rep)
        await self.discard_stale_puts(rep)
        await self.reclaim_allocations(rep)
        await self.drain_outboxes(rep)
        return rep

    async def expire_clients(self, rep: JanitorReport | None = None) -> int:
        """Unmounts the segments of clients silent longer than client_live_ttl_ms of heard
        time (a Redis outage or restart restarts every client's clock, see heartbeat.lua):
        claim (their pings say NEED_REMOUNT, their mounts wait), unmount, forget."""
        rep = rep or JanitorReport()
        expired = await lua.clients_expired(self.ctx)
        rep.expired_clients += len(expired.claimed)
        for seg_id, _client in expired.segments:
            await self.segments.unmount(seg_id)
            rep.unmounted_segments += 1
        await lua.clients_remove(self.ctx)
        return rep.unmounted_segments

    async def resume_unmounts(self, rep: JanitorReport | None = None) -> None:
        rep = rep or JanitorReport()
        for st in await self.segments.segment_stats():
            if not st.mounted:
                await self.segments.finish_unmount(st.id, st.client_id)
                rep.unmounted_segments += 1

    async def discard_stale_puts(self, rep: JanitorReport | None = None) -> None:
        """Discards PROCESSING puts older than the discard timeout (their buffers are released
        at put start + release timeout) and releases due discarded buffers."""
        rep = rep or JanitorReport()
        for _ in range(16):
            done, more = await lua.janitor_shard(self.ctx)
            rep.discarded_puts += done.first
            rep.released_buffers += done.second
            await self.radix.finish_unlinks(done.continuations)
            rep.drained_frees += await self.allocator.apply_frees(done.frees)
            if not more:
                break

    async def reclaim_allocations(self, rep: JanitorReport | None = None) -> None:
        """Pending allocations older than the commit deadline: confirmed if their owner object
        references them (or their free is scheduled), freed past the reclaim grace otherwise."""
        rep = rep or JanitorReport()
        c = self.ctx.config
        ids = await self.allocator.segment_ids(True)
        if not ids:
            return
        now = await self.ctx.backend.time_ms()
        records = await lua.alloc_pending(self.ctx, ids, now - c.alloc_commit_deadline_ms)
        if not records:
            return
        checks = await lua.owner_check(
            self.ctx, [lua.AllocRef(r.owner, r.segment_id, r.offset, r.put_id) for r in records]
        )
        confirm: dict[str, list[tuple[str, str]]] = {}
        free: dict[str, list[tuple[str, str]]] = {}
        for r, hit in zip(records, checks):
            if hit:
                confirm.setdefault(r.segment_id, []).append((r.offset, r.put_id))
                rep.confirmed_allocations += 1
            elif r.ms <= now - c.alloc_reclaim_grace_ms:
                free.setdefault(r.segment_id, []).append((r.offset, r.put_id))
                rep.reclaimed_allocations += 1
        await lua.alloc_confirm(self.ctx, confirm)
        await lua.alloc_free(self.ctx, free)

    async def drain_outboxes(self, rep: JanitorReport | None = None) -> int:
        """Applies every shard's outbox (frees left by a crash between erase and drain)."""
        rep = rep or JanitorReport()
        total = 0
        for _ in range(64):
            frees = await lua.outbox_peek(self.ctx)
            if not frees:
                break
            total += await self.allocator.apply_frees(frees)
        rep.drained_frees += total
        return total
