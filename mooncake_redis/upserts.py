"""Upsert (Mooncake's UpsertStart / UpsertEnd / UpsertRevoke and batch forms): insert or update.

Mooncake's three cases (mooncake-store/src/master_service.cpp, ``MasterService::UpsertStart``):
A, the key is absent: a put; B, it exists COMPLETE with the same size: the same buffers, back to
PROCESSING until UpsertEnd; C, another size, or a put/upsert in progress on the key (preempted at
once): fresh buffers, the old ones released after ``put_start_release_timeout_ms``. UpsertEnd and
UpsertRevoke are PutEnd and PutRevoke there and here.

Steps, each one script on one tag (crash-safe as puts, see store.py): ``upsert_start`` with no
buffers classifies and commits Case B; Case C keys get buffers (``alloc_reserve``, checkpoint
``upsert_start:reserved``) and ``upsert_start`` again commits them; Case A keys go through the
whole put (radix put guard, parents) and a key that a concurrent put created meanwhile starts
over (three rounds at most). Nothing here holds state: a crash after any step leaves a
reservation that the janitor reclaims, or an object PROCESSING that UpsertEnd completes or the
janitor discards as a stale put.

Given the context, the puts (their input checks, the whole put of an absent key, PutEnd and
PutRevoke) and the allocator (reserve and free buffers).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from . import lua_calls as lua
from .allocation import Allocator, PutItem
from .context import Context
from .errors import ErrorCode, MooncakeError
from .lua_calls.upserts import UpsertCommit, UpsertReply
from .models import PROCESSING, ReplicaDescriptor
from .put_checks import ConfigArg
from .puts import Puts, _descriptor, no_space_error

ROUNDS = 3  # an absent key that a concurrent put created meanwhile is upserted again
StartResult = list[ReplicaDescriptor] | MooncakeError


class Upserts:
    def __init__(self, ctx: Context, puts: Puts, allocator: Allocator) -> None:
        self.ctx = ctx
        self.puts = puts
        self.allocator = allocator

    async def upsert_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        [res] = await self.batch_upsert_start(client_id, [key], [slice_lengths], config)
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_upsert_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[StartResult]:
        """One result per key, as BatchPutStart (Mooncake runs UpsertStart per key)."""
        client, todo, results = self.puts.checks.check_batch(client_id, keys, slice_lengths, config)
        for _ in range(ROUNDS):
            if not todo:
                break
            todo = await self._round(client, todo, results)
        for p in todo:
            results[p.index] = MooncakeError(
                ErrorCode.OBJECT_ALREADY_EXISTS,
                f"key {p.key}: created and removed by others during {ROUNDS} upsert attempts",
            )
        return [r if r is not None else MooncakeError(ErrorCode.INTERNAL_ERROR) for r in results]

    async def _round(self, client: str, puts: list[PutItem], results: list[Any]) -> list[PutItem]:
        """One attempt for each key; returns the keys to try again."""
        for p in puts:
            p.pid, p.reps = uuid.uuid4().hex, []  # a fresh owner id per attempt's buffers
        absent: list[PutItem] = []
        need: list[PutItem] = []
        for p, reply in zip(puts, await self._commit(client, puts)):
            if self._settle(p, reply, results):
                continue
            (absent if reply.mode == "absent" else need).append(p)
        if need:
            await self.allocator.reserve(need)
            await self.ctx.checkpoint("upsert_start:reserved")
            await self._no_buffers([p for p in need if not p.reps], results)
            got = [p for p in need if p.reps]
            unused: list[PutItem] = []
            for p, reply in zip(got, await self._commit(client, got)):
                if reply.mode != "new":
                    unused.append(p)
                if not self._settle(p, reply, results):
                    absent.append(p)  # removed meanwhile: a put now (mode 'absent')
            await self.allocator.free_reservations(unused)
        if not absent:
            return []
        res = await self.puts.batch_put_start(
            client, [p.key for p in absent], [[p.size] for p in absent], [p.cfg for p in absent]
        )
        again: list[PutItem] = []
        for p, r in zip(absent, res):
            if isinstance(r, MooncakeError) and r.code == ErrorCode.OBJECT_ALREADY_EXISTS:
                again.append(p)  # a put started on it since: upsert that one
            else:
                results[p.index] = r
        return again

    @staticmethod
    def _settle(p: PutItem, reply: UpsertReply, results: list[Any]) -> bool:
        """Records a final answer; False when the key needs buffers or a put."""
        if reply.code != 0:
            results[p.index] = MooncakeError(reply.code, reply.message)
            return True
        if reply.mode in ("absent", "alloc"):
            return False
        results[p.index] = [_descriptor(r, int(r["id"]), PROCESSING) for r in reply.replicas]
        return True

    async def _commit(self, client: str, puts: Sequence[PutItem]) -> list[UpsertReply]:
        commits = [
            UpsertCommit(
                p.shard,
                p.key,
                p.pid,
                client,
                p.size,
                bool(p.cfg.with_soft_pin),
                bool(p.cfg.with_hard_pin),
                p.reps,
            )
            for p in puts
        ]
        return await lua.upsert_start(self.ctx, commits)

    async def _no_buffers(self, puts: Sequence[PutItem], results: list[Any]) -> None:
        """As a put that got no buffer: too big for every segment, or no space (eviction)."""
        if not puts:
            return
        need_evict = False
        for p in puts:
            err = results[p.index] = no_space_error(p)
            need_evict = need_evict or err.code == ErrorCode.NO_AVAILABLE_HANDLE
        if need_evict:
            await lua.evict_request(self.ctx, "alloc")
