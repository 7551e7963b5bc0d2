"""The object RPCs besides puts (puts.py): replica lists, exist, remove, the object listing;
and the crash-safe step order that every store operation (here, puts.py, segments.py) keeps.

Three kinds of hash tag take part, so every operation is a sequence of single-tag script steps
ordered so that a crash between two steps leaves only a state something reclaims:

- put_start: reserve buffers in the segment tags (owner-tagged with key and put id, recorded as
  pending with Redis time) concurrently with the radix parent link, then commit the object in its
  shard. A crash in between leaves pending allocations: the janitor frees those whose owner never
  committed them (after ``alloc_reclaim_grace_ms``; the commit refuses allocations older than
  ``alloc_commit_deadline_ms``, which is shorter, so a slow commit never attaches a freed buffer).
- erase paths (revoke, remove, stale-put discard, unmount): one shard script deletes the object,
  unregisters it from the radix index (continuations come back for the parent shards) and pushes
  its buffer frees to the shard outbox; the caller then applies the frees to the allocators
  (``alloc_free``: idempotent, put-id checked) and acknowledges them (``outbox_ack``); on a
  single Redis both in one call (``outbox_apply``). A crash leaves entries in the outbox, which
  the janitor drains.
- unmount: the segment stops allocating (``mounted=0``), the replicas its allocation records
  name are dropped in their shards (a reservation not yet committed is vetoed instead), then the
  allocator and the registry entry go. Resumable: the janitor finishes unmounts left half done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from . import lua_calls as lua
from .context import Context
from .errors import ErrorCode, MooncakeError
from .models import (
    GetReplicaListResponse,
)
from .prefix import check_keys, check_str
from .puts import Puts
from .scan import shard_ids

MAX_REGEX_LEN = 1024
REGEX_TIMEOUT_S = 0.05  # per key; a pattern that needs more is refused before anything changes
T = TypeVar("T")


def compile_pattern(pattern: str) -> Any:
    """A RemoveByRegex / GetReplicaListByRegex pattern, or INVALID_PARAMS (invalid, or longer
    than 1024 characters)."""
    check_str("pattern", pattern, MAX_REGEX_LEN)
    import regex  # type: ignore[import-untyped]  # third-party: supports a match timeout

    try:
        return regex.compile(pattern)
    except (regex.error, ValueError, OverflowError) as exc:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"pattern: invalid regex: {exc}") from exc


def search(pat: Any, items: Iterable[T], text: Callable[[T], str]) -> list[T]:
    """The items whose text the pattern finds (search semantics, as std::regex_search); a
    pattern that needs more than 50 ms on one key is refused (INVALID_PARAMS) as a whole."""
    matched: list[T] = []
    for item in items:
        key = text(item)
        try:
            if pat.search(key, timeout=REGEX_TIMEOUT_S):
                matched.append(item)
        except TimeoutError as exc:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"pattern: takes too long on key {key[:64]!r}"
            ) from exc
    return matched


class Objects:
    """The object RPCs besides puts; removals erase through :meth:`Puts.finish_erase`."""

    def __init__(self, ctx: Context, puts: Puts) -> None:
        self.ctx = ctx
        self.puts = puts

    # ------------------------------------------------------------------ reads
    def _checked_keys(self, keys: Sequence[str]) -> tuple[list[Any], list[str], list[int]]:
        """(a result slot per key holding its input error, the valid keys, their indices)."""
        return check_keys(keys, self.ctx.config.max_key_length)

    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        [res] = await self.batch_get_replica_list([key])
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        """GetReplicaList per key: the COMPLETE replicas, granting a lease."""
        results, items, where = self._checked_keys(keys)
        ttl = self.ctx.config.default_kv_lease_ttl_ms
        for i, r in zip(where, await lua.get_replicas(self.ctx, items)):
            if r.code != 0:
                results[i] = MooncakeError(r.code, r.message)
                continue
            results[i] = GetReplicaListResponse(r.replicas, ttl)
        return results

    async def exist_key(self, key: str) -> bool:
        [res] = await self.batch_exist_key([key])
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        """ExistKey per key: True only with a COMPLETE replica; a hit grants a lease."""
        results, items, where = self._checked_keys(keys)
        hits: list[Any] = await lua.exist(self.ctx, items)
        if len(items) == len(keys):
            return hits
        for i, hit in zip(where, hits):
            results[i] = hit
        return results

    # ------------------------------------------------------------------ removal
    async def remove(self, key: str, force: bool = False) -> None:
        [res] = await self.batch_remove([key], force)
        if res is not None:
            raise res

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        results, items, where = self._checked_keys(keys)
        erased = await lua.remove(self.ctx, items, skip=False, force=force)
        for i, r in zip(where, await self.puts.finish_erase(erased)):
            results[i] = r.error()
        return results

    async def complete_objects(self) -> dict[str, str]:
        """Key -> put id of every COMPLETE object, without granting a lease: one atomic script
        call per node (a consistent snapshot on a single Redis, even while an evictor runs).
        For tools, health samples and tests, not a Mooncake RPC."""
        return await lua.objects_complete(self.ctx)

    async def complete_keys(self) -> set[str]:
        """The keys of :meth:`complete_objects` without their put ids: for key lists (the
        admin ``/get_all_keys``, the replay's health samples), at about 70 % of its cost."""
        return await lua.complete_keys(self.ctx)

    async def all_object_keys(self) -> list[str]:
        """Every stored object key, by SCAN (the layout keeps no per-shard SET of them)."""
        found = await shard_ids(self.ctx.backend, self.ctx.keys, "obj")
        return [k for shard in sorted(found) for k in found[shard]]

    async def _remove_skip(self, keys: Sequence[str], force: bool) -> int:
        erased = await lua.remove(self.ctx, keys, skip=True, force=force)
        return sum(1 for r in await self.puts.finish_erase(erased) if r.code == 0)

    async def _keys_matching(self, pattern: str) -> list[str]:
        """Object keys the pattern finds (search semantics, as std::regex_search). A pattern
        that is invalid, longer than 1024 characters, or needs more than 50 ms on one key is
        refused (INVALID_PARAMS) before anything is done with the keys."""
        pat = compile_pattern(pattern)
        return search(pat, await self.all_object_keys(), str)

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        """RemoveByRegex: removes matching objects, skipping leased (unless force) or incomplete
        ones; returns the count."""
        return await self._remove_skip(await self._keys_matching(pattern), force)

    async def get_replica_list_by_regex(self, pattern: str) -> dict[str, GetReplicaListResponse]:
        """GetReplicaListByRegex: the COMPLETE replicas of every matching object, granting
        leases as GetReplicaList does (as Mooncake's master)."""
        keys = await self._keys_matching(pattern)
        res = await self.batch_get_replica_list(keys)
        return {k: r for k, r in zip(keys, res) if not isinstance(r, MooncakeError)}

    async def remove_all(self, force: bool = False) -> int:
        """RemoveAll: removes every object that is not leased (unless force) and complete."""
        return await self._remove_skip(await self.all_object_keys(), force)
