"""The put RPCs: put start (reserve + link, then commit, in bounded chunks), end, revoke.

Each is a sequence of single-tag script steps in the crash-safe order ``objects.py`` describes;
the radix put guard (no orphans, no partial blocks) and the parent cycle check live here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence, Set
from typing import Any

from . import lua_calls as lua
from .allocation import Allocator, PutItem
from .context import Context
from .cycles import CHECK_CYCLE, check_links
from .errors import ErrorCode, MooncakeError
from .lua_calls.puts import (
    FOLD_LINK,
    FOLD_STORED,
    Commit,
    Committed,
    Precheck,
    put_precheck,
    put_start,
)
from .lua_calls.store import Erased, Result
from .models import (
    PROCESSING,
    ReplicaDescriptor,
)
from .prefix import check_keys, check_str
from .put_checks import ConfigArg, PutChecks
from .put_links import folded_puts
from .radix import RadixIndex
from .types import replica_descriptor


def _descriptor(rep: Mapping[str, Any], replica_id: int, status: str) -> ReplicaDescriptor:
    """A replica record (offsets, lengths and base as u64 hex) as Mooncake's descriptor."""
    off = int(rep["off"], 16)
    return replica_descriptor(
        replica_id, status, str(rep["seg"]), str(rep.get("name", "")), int(rep["base"], 16) + off,
        int(rep["len"], 16), str(rep["proto"]), str(rep["ep"]), off,
    )  # fmt: skip


def no_space_error(p: PutItem) -> MooncakeError:
    """Why a put got no buffer, the key being absent: too big for every segment
    (INVALID_PARAMS), or no room now (NO_AVAILABLE_HANDLE: eviction is asked for)."""
    if p.maxsize and p.size > p.maxsize:
        return MooncakeError(
            ErrorCode.INVALID_PARAMS,
            f"slice_lengths: {p.size} bytes exceed every mounted segment ({p.maxsize})",
        )
    return MooncakeError(
        ErrorCode.NO_AVAILABLE_HANDLE, f"key {p.key}: no segment has {p.size} bytes free"
    )


def _cycle_msg(p: PutItem) -> str:
    return (
        f"parent_block_hash: block {p.cfg.parent_block_hash} is below {p.prefix};"
        " the put would close a parent cycle"
    )


def _second_parent_msg(p: PutItem) -> str:
    return (
        f"parent_block_hash: block {p.prefix} is given another parent by this batch;"
        f" it cannot also take {p.cfg.parent_block_hash}"
    )


class Puts:
    """The put RPCs, and the erase step every removal path shares (:meth:`finish_erase`)."""

    def __init__(self, ctx: Context, radix: RadixIndex, allocator: Allocator) -> None:
        self.ctx = ctx
        self.radix = radix
        self.allocator = allocator
        self.checks = PutChecks(ctx)

    # ------------------------------------------------------------------ erase plumbing
    async def finish_erase(self, erased: Erased) -> list[Result]:
        """The rest of an erase step (``remove``, ``put_revoke``...): the unlinks upward, then
        the frees to the allocators; the per-item results."""
        await self.ctx.checkpoint("erase:erased")
        await self.radix.finish_unlinks(erased.continuations)
        await self.allocator.apply_frees(erased.frees)
        return erased.results

    # ------------------------------------------------------------------ put
    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        [res] = await self.batch_put_start(client_id, [key], [slice_lengths], config)
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        """BatchPutStart: one result per key. ``config`` is one ReplicateConfig for all keys (as
        Mooncake) or a list with one per key (so one batch can carry several radix parents)."""
        client, puts, results = self.checks.check_batch(client_id, keys, slice_lengths, config)
        # Bounded chunks, each reserved and committed before the next: a reservation is
        # refused once older than alloc_commit_deadline_ms, so a batch of any size must never
        # reserve more than it commits within that time. A chunk that takes over a quarter of
        # the deadline halves the next one (a slow or loaded Redis); a fast one doubles it.
        in_batch = {p.prefix for p in puts}
        failed: list[PutItem] = []
        cap = self.ctx.config.batch_chunk_size
        size = min(cap, 256)
        budget = self.ctx.config.alloc_commit_deadline_ms / 1000.0
        start = 0
        while start < len(puts):
            chunk = puts[start : start + size]
            start += len(chunk)
            t0 = time.monotonic()
            failed.extend(await self._put_chunk(client, chunk, in_batch, results))
            took = time.monotonic() - t0
            if took > budget / 4:
                size = max(16, size // 2)
            elif took < budget / 16:
                size = min(cap, size * 2)
        if self.ctx.config.enable_radix_tree and self.ctx.config.radix_put_guard:
            await self._roll_back_partial(client, puts, failed, results)
        return [r if r is not None else MooncakeError(ErrorCode.INTERNAL_ERROR) for r in results]

    async def _put_chunk(
        self, client: str, puts: list[PutItem], in_batch: set[str], results: list[Any]
    ) -> list[PutItem]:
        """Reserve + link, then commit, for one chunk of a batch; returns the failed puts (their
        buffers freed, their fresh parent edges dropped)."""
        radix = self.ctx.config.enable_radix_tree
        guard = radix and self.ctx.config.radix_put_guard
        # The puts their commit links (put_links.folded_puts), by index, with the generation
        # the commit gets: FOLD_STORED when the parent is no block of the batch and the guard
        # is on (the commit refuses the put when that parent is not stored, as _orphan_puts
        # does below for a put linked by the link step), else FOLD_LINK.
        folded = folded_puts(puts, self.ctx.config.script_batch_size, in_batch) if radix else ()
        fold = {
            p.index: FOLD_STORED if guard and p.cfg.parent_block_hash not in in_batch else FOLD_LINK
            for p in puts
            if p.index in folded
        }
        linked = [p for p in puts if radix and p.cfg.parent_block_hash and p.index not in fold]
        # Step 1: reserve buffers (segment tags) and link radix parents (parent shards).
        _, links = await asyncio.gather(
            self.allocator.reserve(puts),
            self.radix.link_parents(
                [(p.cfg.parent_block_hash, p.prefix) for p in linked], [p.pshard for p in linked]
            ),
        )
        rooted: set[str] = set()  # parents with no parent of their own when linked
        for p, (gen, stored, root) in zip(linked, links):
            p.gen, p.parent_stored = gen, stored
            if root:
                rooted.add(p.cfg.parent_block_hash)
        await self.ctx.checkpoint("put_start:reserved")
        failed: list[PutItem] = []
        empty = [p for p in puts if not p.reps]
        orphans = self._orphan_puts(linked, in_batch) if guard else []
        if empty or orphans:
            # an empty put its commit would have guarded: the precheck applies the guard
            guarded = {p.index for p in empty if fold.get(p.index) == FOLD_STORED}
            await self._explain_no_replica(empty, results, orphans, guarded)
            failed.extend(empty)
            failed.extend(orphans)
        # Step 2: commit in the object shards.
        todo = [p for p in puts if p.reps and p not in orphans]

        def item(p: PutItem, checked: int) -> Commit:
            parent = p.cfg.parent_block_hash if radix else ""
            cfg = p.cfg
            gen = fold.get(p.index, p.gen)
            return Commit(
                p.shard, p.key, p.pid, p.size, bool(cfg.with_soft_pin), bool(cfg.with_hard_pin),
                p.reps, p.prefix, parent, p.pshard if parent else -1, gen, bool(checked),
            )  # fmt: skip

        conts: list[Any] = []

        async def commit(items: list[Commit]) -> list[Committed]:
            replies, cs = await put_start(self.ctx, client, items, radix)
            conts.extend(cs)
            return replies

        # A put of a block that now has children and no parent (a chain put in one batch, its
        # parents linked by the link step: each block is the parent of the next) gets its
        # parent only if the block is not that parent's root (cycles.py); checked here, in
        # batch order, before its commit. Not a folded put: the links earlier puts make in the
        # same commit are not in this check's view, so its commit checks itself (CHECK_CYCLE
        # below, against the state that call left), as for a node that had children before.
        pre = [
            p
            for p in todo
            if p.prefix in rooted and p.cfg.parent_block_hash and p.index not in fold
        ]
        checked: set[int] = set()
        if pre:
            links_pre = [(p.prefix, p.cfg.parent_block_hash) for p in pre]
            refused: set[int] = set()
            for p, bad in zip(pre, await check_links(self.ctx, links_pre, rooted)):
                if bad:
                    results[p.index] = MooncakeError(ErrorCode.INVALID_PARAMS, _cycle_msg(p))
                    failed.append(p)
                    refused.add(p.index)
                elif bad is False:  # None: a second parent, the commit checks itself
                    checked.add(p.index)
            todo = [p for p in todo if p.index not in refused]
        if radix:  # the common case: each Commit built inline (tuple.__new__: no Python call)
            new = tuple.__new__
            replies = await commit(
                [
                    new(Commit, (
                        p.shard, p.key, p.pid, p.size, bool(p.cfg.with_soft_pin),
                        bool(p.cfg.with_hard_pin), p.reps, p.prefix, p.cfg.parent_block_hash,
                        p.pshard if p.cfg.parent_block_hash else -1,
                        fold.get(p.index, p.gen), p.index in checked,
                    ))
                    for p in todo
                ]
            )  # fmt: skip
        else:
            replies = await commit([item(p, 1 if p.index in checked else 0) for p in todo])
        # A put linked in its commit: its parent's block as it was before the commit (the
        # roll back below keeps a child of a stored block); one that must be checked first was
        # linked all the same and is sent again, or undone, with that generation.
        for p, r in zip(todo, replies):
            if r.link is not None:
                p.parent_stored = r.link[1]
                if r.code == CHECK_CYCLE:
                    p.gen = r.link[0]
                    fold.pop(p.index, None)
        # A node that exists without a parent and has children (a root with a child, a shell)
        # takes a parent only when it is not that parent's root: a second key of a node put
        # under the node's own child would close a cycle (cycles.py; in batch order).
        again = [j for j, r in enumerate(replies) if r.code == CHECK_CYCLE]
        if again:
            cycles = await check_links(
                self.ctx, [(todo[j].prefix, todo[j].cfg.parent_block_hash) for j in again]
            )
            for j, bad in zip(again, cycles):
                if bad is not False:  # None: a second parent for the block, both to be checked
                    msg = _cycle_msg(todo[j]) if bad else _second_parent_msg(todo[j])
                    replies[j] = Committed(int(ErrorCode.INVALID_PARAMS), msg, [], False, None)
            resend = [j for j, bad in zip(again, cycles) if bad is False]
            for j, r in zip(resend, await commit([item(todo[j], 1) for j in resend])):
                replies[j] = r
        # The descriptors (_descriptor inline): u64 hex values parsed once per distinct value
        # (a batch's sizes and segment bases repeat).
        hexes: dict[str, int] = {}
        for p, reply in zip(todo, replies):
            if reply.code != 0:
                results[p.index] = MooncakeError(reply.code, reply.message)
                p.adopted = reply.adopted
                failed.append(p)
                continue
            descs = []
            for rid, rep in zip(reply.replica_ids, p.reps):
                off = int(rep["off"], 16)
                base, length = hexes.get(rep["base"]), hexes.get(rep["len"])
                if base is None:
                    base = hexes[rep["base"]] = int(rep["base"], 16)
                if length is None:
                    length = hexes[rep["len"]] = int(rep["len"], 16)
                descs.append(
                    replica_descriptor(
                        rid, PROCESSING, rep["seg"], rep["name"], base + off, length, rep["proto"],
                        rep["ep"], off,
                    )
                )  # fmt: skip
            results[p.index] = descs
        # Failed items: free their buffers, drop the parent edges made for them. Keys of one
        # block put under one parent share one edge, of the last link's generation: when one of
        # them is stored, a failed one's edge is adopted (the node's generation raised to it,
        # as put_start does for a sibling stored before it), not dropped from under it.
        shared = [p for p in failed if p.gen and not p.adopted]
        if shared:
            kept = {
                (p.prefix, p.cfg.parent_block_hash)
                for p in todo
                if p.cfg.parent_block_hash and not isinstance(results[p.index], MooncakeError)
            }
            shared = [p for p in shared if (p.prefix, p.cfg.parent_block_hash) in kept]
        if shared:
            checks = [
                Precheck(p.shard, p.key, p.prefix, p.cfg.parent_block_hash, p.gen) for p in shared
            ]
            adopt = await put_precheck(self.ctx, checks)
            for p, check in zip(shared, adopt):
                p.adopted = check.adopted
        undo = [
            (p.cfg.parent_block_hash, p.pshard, p.prefix, str(p.gen))
            for p in failed
            if p.gen and not p.adopted
        ]
        if failed or conts:
            await asyncio.gather(
                self.allocator.free_reservations([p for p in failed if p.reps]),
                self.radix.finish_unlinks([*conts, *undo]),
            )
        return failed

    @staticmethod
    def _orphan_puts(linked: Sequence[PutItem], in_batch: set[str]) -> list[PutItem]:
        """Puts whose parent block is neither completely stored nor part of this batch."""
        return [
            p for p in linked if not p.parent_stored and p.cfg.parent_block_hash not in in_batch
        ]

    async def _roll_back_partial(
        self,
        client: str,
        puts: Sequence[PutItem],
        failed: Sequence[PutItem],
        results: list[Any],
    ) -> None:
        """Revokes what this batch committed for a block that it did not accept whole, and for
        children of such blocks that had no other stored parent, until nothing changes."""
        bad = {
            p.prefix
            for p in failed
            if not (
                isinstance(results[p.index], MooncakeError)
                and results[p.index].code == ErrorCode.OBJECT_ALREADY_EXISTS
            )
        }
        if not bad:  # the common case: nothing to roll back (the walk below would find none)
            return
        done = [p for p in puts if not isinstance(results[p.index], MooncakeError)]
        while True:
            undo = [
                p
                for p in done
                if p.prefix in bad or (p.cfg.parent_block_hash in bad and not p.parent_stored)
            ]
            if not undo:
                return
            await self.batch_put_revoke(client, [p.key for p in undo])
            for p in undo:
                results[p.index] = MooncakeError(
                    ErrorCode.NO_AVAILABLE_HANDLE,
                    f"key {p.key}: rolled back, its block or its parent block was not stored whole",
                )
                bad.add(p.prefix)
            done = [p for p in done if p not in undo]

    async def _explain_no_replica(
        self,
        puts: list[PutItem],
        results: list[Any],
        orphans: Sequence[PutItem] = (),
        guarded: Set[int] = frozenset(),
    ) -> None:
        """Puts that got no buffer: OBJECT_ALREADY_EXISTS if the key exists (Mooncake checks that
        first), INVALID_PARAMS if no segment could ever hold it, else NO_AVAILABLE_HANDLE with a
        durable eviction request. Orphan puts (refused by the radix put guard): OBJECT_NOT_FOUND
        naming the parent block, unless the key exists; so are the ``guarded`` puts (indices)
        whose parent block the precheck finds not stored (their commit would have checked it)."""
        radix = self.ctx.config.enable_radix_tree
        every = [*puts, *orphans]
        replies = await put_precheck(
            self.ctx,
            [
                Precheck(
                    p.shard,
                    p.key,
                    p.prefix,
                    p.cfg.parent_block_hash if radix else "",
                    p.gen,
                    p.index in guarded,
                )
                for p in every
            ],
        )
        need_evict = False
        for n, (p, (exists, adopted, orphan)) in enumerate(zip(every, replies)):
            p.adopted = adopted
            if (n >= len(puts) or orphan) and not exists:
                results[p.index] = MooncakeError(
                    ErrorCode.OBJECT_NOT_FOUND,
                    f"config.parent_block_hash: block {p.cfg.parent_block_hash} is not stored"
                    " (or is itself an orphan: its own parent block is gone);"
                    " refusing an orphan (radix_put_guard)",
                )
            elif exists:
                results[p.index] = MooncakeError(
                    ErrorCode.OBJECT_ALREADY_EXISTS, f"key {p.key}: object already exists"
                )
            else:
                err = results[p.index] = no_space_error(p)
                need_evict = need_evict or err.code == ErrorCode.NO_AVAILABLE_HANDLE
        if need_evict:
            await lua.evict_request(self.ctx, "alloc")

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        [res] = await self.batch_put_end(client_id, [key], replica_type)
        if res is not None:
            raise res

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self._client_step("put_end", client_id, keys, replica_type)

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        [res] = await self.batch_put_revoke(client_id, [key], replica_type)
        if res is not None:
            raise res

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self._client_step("put_revoke", client_id, keys, replica_type)

    async def _client_step(
        self, script: str, client_id: str, keys: Sequence[str], replica_type: str
    ) -> list[MooncakeError | None]:
        client = check_str("client_id", client_id, self.ctx.config.max_key_length)
        if replica_type not in ("MEMORY", "memory"):
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"replica_type: only MEMORY, got {replica_type!r}"
            )
        results, checked, where = check_keys(keys, self.ctx.config.max_key_length)
        if script == "put_end":
            replies = await lua.put_end(self.ctx, checked, client)
        else:
            replies = await self.finish_erase(await lua.put_revoke(self.ctx, checked, client))
        for i, r in zip(where, replies):
            if r.code:
                results[i] = r.error()
        return results
