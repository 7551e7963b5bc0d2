"""Each served Mooncake RPC as calls of the ``MasterService`` facade (its public RPC methods
only, so the front end survives a reshaped store), and the results in Mooncake's types.

Mapping rules (docs/wire.md has the whole table):
- client and segment UUIDs become the store's string ids (``ids.uuid_str``);
- error codes pass through one to one (``MooncakeError.code``); Redis unreachable is RPC_FAIL,
  Redis out of memory NO_AVAILABLE_HANDLE, anything else INTERNAL_ERROR (as over HTTP);
- ``tenant_id`` scopes every object call (``MasterService.tenant``: Mooncake's scoped key,
  ``"default"`` as before); an invalid one is INVALID_PARAMS;
- Upsert* are the store's upserts (Mooncake's semantics, upserts.py);
- a put's ReplicaType must be MEMORY or ALL (the memory-only store's whole put).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..backend import map_redis_error
from ..errors import ErrorCode, MooncakeError
from ..models import GetReplicaListResponse as StoreReplicaList
from ..models import ReplicaDescriptor as StoreReplica
from ..models import ReplicateConfig as StoreConfig
from ..models import Segment as StoreSegment
from ..prefix import SCOPE
from ..service import MasterService
from ..tenants import TenantScope
from .ids import uuid_str
from .parents import ParentHints
from .rpc_table import SIGNATURES
from .structpack import Err
from .types import (
    CLIENT_STATUS,
    REPLICA_STATUS,
    REPLICA_TYPE_ALL,
    REPLICA_TYPE_MEMORY,
    SOFT_PIN_ENABLE,
    BufferDescriptor,
    GetReplicaListResponse,
    GetStorageConfigResponse,
    MemoryDescriptor,
    ObjectMeta,
    PingResponse,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
)

log = logging.getLogger("mooncake_redis.wire")

STORE_VERSION = "2.0.0"  # ServiceReady must answer the client's own version string
MAX_SCOPES = 1024  # tenant scopes a worker keeps (they hold nothing but the id)
SEGMENT_NAMES_TTL_S = 1.0
Handler = Callable[[Any], Awaitable[Any]]


def error_code(exc: BaseException) -> int:
    """The Mooncake code a failed facade call answers with (the backend's one mapping)."""
    mapped = map_redis_error(exc, "a wire RPC")
    if mapped is not None:
        return int(mapped.code)
    log.exception("internal error in a wire RPC", exc_info=exc)
    return int(ErrorCode.INTERNAL_ERROR)


def _err(code: ErrorCode | int) -> Err:
    return Err(int(code))


def _items(results: list[Any]) -> list[Any]:
    """Per-key MooncakeErrors as Err; a list without one (the common case) as it is, found
    from the set of its item types (no Python call per key)."""
    if not any(issubclass(t, MooncakeError) for t in set(map(type, results))):
        return results
    return [_err(r.code) if isinstance(r, MooncakeError) else r for r in results]


_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (three per replica)


def replica(r: StoreReplica) -> ReplicaDescriptor:
    buf = _new(BufferDescriptor, (r.size, r.buffer_address, r.protocol, r.transport_endpoint))
    mem = _new(MemoryDescriptor, (buf,))
    return _new(ReplicaDescriptor, (r.replica_id, mem, REPLICA_STATUS[r.status]))


def replica_list(r: StoreReplicaList) -> GetReplicaListResponse:
    return GetReplicaListResponse([replica(x) for x in r.replicas], r.lease_ttl_ms, None)


def store_segment(s: Segment) -> StoreSegment:
    """The store's segment: id from the UUID, te_endpoint (what replicas carry as their
    transport endpoint) falling back to the name, as older clients leave it empty."""
    return StoreSegment(
        id=uuid_str(s.id),
        name=s.name,
        base=s.base,
        size=s.size,
        te_endpoint=s.te_endpoint or s.name,
        protocol=s.protocol or "tcp",
    )


class WireFrontend:
    """The handlers, by RPC name; each takes the decoded arguments, returns the result value."""

    def __init__(self, svc: MasterService, parents: ParentHints | None = None) -> None:
        self.svc = svc
        self.parents = parents
        self._names: dict[str, str] = {}
        self._names_at = 0.0
        self._scopes: dict[str, TenantScope] = {}
        self.handlers: dict[str, Handler] = {name: getattr(self, name) for name in SIGNATURES}

    # ------------------------------------------------------------------ setup and liveness
    async def ServiceReady(self, _: None) -> str:
        return STORE_VERSION

    async def GetStorageConfig(self, _: None) -> GetStorageConfigResponse:
        return GetStorageConfigResponse("", True, 0)  # no disk tier: what the real master says

    async def GetFsdir(self, _: None) -> str:
        return ""

    async def MountSegment(self, args: tuple[Segment, Any]) -> Any:
        seg, client = args
        await self.svc.mount_segment(store_segment(seg), uuid_str(client))
        self._names_at = 0.0

    async def ReMountSegment(self, args: tuple[list[Segment], Any]) -> Any:
        segs, client = args
        await self.svc.remount_segment([store_segment(s) for s in segs], uuid_str(client))
        self._names_at = 0.0

    async def UnmountSegment(self, args: tuple[Any, Any]) -> Any:
        seg, client = args
        await self.svc.unmount_segment(uuid_str(seg), uuid_str(client))
        self._names_at = 0.0

    async def Ping(self, client: Any) -> PingResponse:
        r = await self.svc.ping(uuid_str(client))
        return PingResponse(r.view_version_id, CLIENT_STATUS[r.client_status])

    async def FetchTasks(self, _: Any) -> list[Any]:
        return []  # no copy/move/offload tasks in this store

    # ------------------------------------------------------------------ tenants
    def _scope(self, tenant: str) -> TenantScope:
        """The tenant's view of the store (tenants.py); an invalid id is INVALID_PARAMS."""
        scope = self._scopes.get(tenant)
        if scope is None:
            scope = self.svc.tenant(tenant)
            if len(self._scopes) < MAX_SCOPES:
                self._scopes[tenant] = scope
        return scope

    async def _each(
        self, tenant: str, keys: list[str], call: Callable[[list[Any], Sequence[int]], Any]
    ) -> list[Any]:
        """A batch in one tenant: per-key errors in place, a bad tenant for every key.

        Decoded keys are always strings; when none is empty and none holds a NUL (so none has
        a scoped key's form) every key maps, and the scope's own per-key checks are skipped:
        the default tenant's keys go to the library as they are."""
        try:
            scope = self._scope(tenant)
        except MooncakeError as exc:
            return [_err(exc.code)] * len(keys)
        if all(keys) and SCOPE not in "".join(keys):
            head = scope.head
            mapped = [head + k for k in keys] if head else keys
            return _items(list(await call(mapped, range(len(keys)))))
        return _items(await scope.each(keys, call))

    # ------------------------------------------------------------------ reads
    async def ExistKey(self, args: tuple[str, str]) -> Any:
        key, tenant = args
        return await self._scope(tenant).exist_key(key)

    async def BatchExistKey(self, args: tuple[list[str], str]) -> list[Any]:
        keys, tenant = args
        hints = self.parents

        async def call(ks: list[Any], _: Sequence[int]) -> Any:
            pairs = self._pairs(hints, ks) if hints is not None else None
            if not pairs:
                return await self.svc.batch_exist_key(ks)
            res, _seen = await asyncio.gather(
                self.svc.batch_exist_key(ks), self._record(hints, pairs)
            )
            return res

        return await self._each(tenant, keys, call)

    @staticmethod
    def _pairs(hints: ParentHints, keys: list[str]) -> list[tuple[str, str]]:
        try:
            return hints.new_pairs(keys)
        except Exception as exc:  # hints only add edges: never fail the read for them
            log.warning("parent hints not inferred: %s", type(exc).__name__)
            return []

    @staticmethod
    async def _record(hints: ParentHints | None, pairs: list[tuple[str, str]]) -> None:
        try:
            if hints is not None:
                await hints.record(pairs)
        except Exception as exc:  # hints only add edges: never fail the read for them
            log.warning("parent hints not recorded: %s", type(exc).__name__)

    async def GetReplicaList(self, args: tuple[str, str]) -> Any:
        key, tenant = args
        return replica_list(await self._scope(tenant).get_replica_list(key))

    async def BatchGetReplicaList(self, args: tuple[list[str], str]) -> list[Any]:
        keys, tenant = args
        res = await self._each(tenant, keys, lambda ks, _: self.svc.batch_get_replica_list(ks))
        return [r if isinstance(r, Err) else replica_list(r) for r in res]

    async def GetReplicaListByRegex(self, args: tuple[str, str]) -> Any:
        pattern, tenant = args
        found = await self._scope(tenant).get_replica_list_by_regex(pattern)
        return {k: [replica(x) for x in r.replicas] for k, r in found.items()}

    # ------------------------------------------------------------------ puts and upserts
    async def _segment_ids(self, names: Sequence[str]) -> list[str]:
        """Mooncake prefers segments by name; the store by id."""
        if time.monotonic() - self._names_at > SEGMENT_NAMES_TTL_S:
            self._names = {s.name: s.id for s in await self.svc.segment_stats()}
            self._names_at = time.monotonic()
        return [self._names.get(n, n) for n in names]

    async def _config(self, c: ReplicateConfig) -> StoreConfig:
        preferred = [p for p in c.preferred_segments if p]
        single = c.preferred_segment
        if preferred or single:
            preferred = await self._segment_ids(preferred)
            single = (await self._segment_ids([single]))[0] if single else ""
        return StoreConfig(
            replica_num=c.replica_num,
            with_soft_pin=c.soft_pin_action == SOFT_PIN_ENABLE,
            with_hard_pin=c.with_hard_pin,
            preferred_segments=tuple(preferred),
            preferred_segment=single,
            prefer_alloc_in_same_node=c.prefer_alloc_in_same_node,
        )

    @staticmethod
    def _with_parents(cfg: StoreConfig, parents: Sequence[str]) -> list[StoreConfig]:
        base = cfg.to_dict()
        return [StoreConfig.from_dict({**base, "parent_block_hash": p}) for p in parents]

    async def _start(
        self,
        upsert: bool,
        client: str,
        keys: list[str],
        sizes: list[int],
        config: ReplicateConfig,
        tenant: str,
    ) -> list[Any]:
        """BatchPutStart / BatchUpsertStart on the tenant's keys; inferred parents come from
        hints on the same scoped keys, so they are the tenant's blocks."""
        if len(sizes) != len(keys):
            return [_err(ErrorCode.INVALID_PARAMS)] * len(keys)
        cfg = await self._config(config)
        hints = self.parents if self.svc.config.enable_radix_tree else None
        method = self.svc.batch_upsert_start if upsert else self.svc.batch_put_start

        async def call(ks: list[Any], where: Sequence[int]) -> Any:
            lengths = [[sizes[i]] for i in where]
            if hints is None:
                return await method(client, ks, lengths, cfg)
            parents = await hints.parents(ks)
            return await method(client, ks, lengths, self._with_parents(cfg, parents))

        res = await self._each(tenant, keys, call)
        return [r if isinstance(r, Err) else [replica(x) for x in r] for r in res]

    async def PutStart(self, args: tuple[Any, str, int, ReplicateConfig, str]) -> Any:
        client, key, size, config, tenant = args
        [res] = await self._start(False, uuid_str(client), [key], [size], config, tenant)
        return res

    async def BatchPutStart(self, args: tuple[Any, list[str], list[int], Any, str]) -> list[Any]:
        client, keys, sizes, config, tenant = args
        return await self._start(False, uuid_str(client), keys, sizes, config, tenant)

    async def UpsertStart(self, args: tuple[Any, str, int, ReplicateConfig, str]) -> Any:
        client, key, size, config, tenant = args
        [res] = await self._start(True, uuid_str(client), [key], [size], config, tenant)
        return res

    async def BatchUpsertStart(self, args: tuple[Any, list[str], list[int], Any, str]) -> list[Any]:
        client, keys, sizes, config, tenant = args
        return await self._start(True, uuid_str(client), keys, sizes, config, tenant)

    async def _ends(self, revoke: bool, client: Any, keys: list[str], tenant: str) -> list[Any]:
        method = self.svc.batch_put_revoke if revoke else self.svc.batch_put_end
        cid = uuid_str(client)
        return await self._each(tenant, keys, lambda ks, _: method(cid, ks))

    async def PutEnd(self, args: tuple[Any, ObjectMeta, int, str]) -> Any:
        client, meta, rtype, tenant = args
        _replica_type(rtype)
        [res] = await self._ends(False, client, [meta.key], tenant)
        return res

    async def PutRevoke(self, args: tuple[Any, str, int, str]) -> Any:
        client, key, rtype, tenant = args
        _replica_type(rtype)
        [res] = await self._ends(True, client, [key], tenant)
        return res

    async def BatchPutEnd(self, args: tuple[Any, list[ObjectMeta], int, str]) -> list[Any]:
        client, metas, rtype, tenant = args
        if rtype not in (REPLICA_TYPE_MEMORY, REPLICA_TYPE_ALL):
            return [_err(ErrorCode.INVALID_PARAMS)] * len(metas)
        return await self._ends(False, client, [m.key for m in metas], tenant)

    async def BatchPutRevoke(self, args: tuple[Any, list[str], int, str]) -> list[Any]:
        client, keys, rtype, tenant = args
        if rtype not in (REPLICA_TYPE_MEMORY, REPLICA_TYPE_ALL):
            return [_err(ErrorCode.INVALID_PARAMS)] * len(keys)
        return await self._ends(True, client, keys, tenant)

    # Mooncake's UpsertEnd / UpsertRevoke are its PutEnd / PutRevoke (the batch forms there
    # take no ReplicaType: the whole object).
    UpsertEnd = PutEnd
    UpsertRevoke = PutRevoke

    async def BatchUpsertEnd(self, args: tuple[Any, list[ObjectMeta], str]) -> list[Any]:
        client, metas, tenant = args
        return await self._ends(False, client, [m.key for m in metas], tenant)

    async def BatchUpsertRevoke(self, args: tuple[Any, list[str], str]) -> list[Any]:
        client, keys, tenant = args
        return await self._ends(True, client, keys, tenant)

    # ------------------------------------------------------------------ removal
    async def Remove(self, args: tuple[str, bool, str]) -> Any:
        key, force, tenant = args
        await self._scope(tenant).remove(key, force)

    async def BatchRemove(self, args: tuple[list[str], bool, str]) -> list[Any]:
        keys, force, tenant = args
        return await self._each(tenant, keys, lambda ks, _: self.svc.batch_remove(ks, force))

    async def RemoveByRegex(self, args: tuple[str, bool, str]) -> Any:
        pattern, force, tenant = args
        return await self._scope(tenant).remove_by_regex(pattern, force)

    async def RemoveAll(self, args: tuple[bool, str]) -> int:
        """A plain ``long``: a failure travels as its negative error code, which is what the
        client's ``remove_all`` returns for a failed call."""
        force, tenant = args
        try:
            return await self._scope(tenant).remove_all(force)
        except Exception as exc:
            return error_code(exc)


def _replica_type(rtype: int) -> str:
    if rtype not in (REPLICA_TYPE_MEMORY, REPLICA_TYPE_ALL):
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"replica_type {rtype}: memory only")
    return "MEMORY"
