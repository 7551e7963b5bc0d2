"""Tenants: ``tenant_id`` is part of an object's identity, as in Mooncake (tenant_id.h).

The mapping is Mooncake's scoped key, made unambiguous: an object of tenant ``T`` other than
``"default"`` is stored under the internal key ``"\\0" + T + "\\0" + key``; a ``"default"``
object under its key as today, so nothing stored before tenants needs a migration. Only a
well-formed scoped key parses as one (``prefix.split_scoped``: a valid tenant id between the
NULs, a non-empty key after), so the split is a pure function of the stored key (the janitor and
fsck find an object's shard from its key alone), and the default scope refuses a key of that
form (it would be another tenant's). The radix prefix of a scoped key is its scope plus the
prefix of the user key (``Context.prefix_of``), and a parent block hash is scoped the same
way, so radix nodes and their parent/child links never cross tenants; the index's shard follows
the scoped prefix, so tenants spread as keys do. Reads, removes, regex and remove_all through a
scope see only that tenant's objects; the library's unscoped methods stay the whole store's (an
operator's view, where a scoped key is spelled out).

Valid tenant ids (Mooncake ``TenantId::IsValid``): printable ASCII, not starting with ``_``;
the empty string is ``"default"``. A scope is given the parts whose RPCs it scopes: objects,
puts and upserts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .config import Config
from .errors import ErrorCode, MooncakeError
from .objects import Objects, compile_pattern, search
from .prefix import SCOPE, split_scoped
from .put_checks import ConfigArg
from .puts import Puts
from .types import GetReplicaListResponse, ReplicaDescriptor, ReplicateConfig
from .upserts import Upserts

DEFAULT_TENANT = "default"
T = TypeVar("T")


def check_tenant(tenant_id: object, max_len: int = 256) -> str:
    """A valid tenant id (Mooncake's rules), ``""`` read as ``"default"``."""
    if not isinstance(tenant_id, str):
        raise MooncakeError(ErrorCode.INVALID_PARAMS, "tenant_id: expected a string")
    if tenant_id == "":
        return DEFAULT_TENANT
    if len(tenant_id) > max_len:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"tenant_id: more than {max_len} characters")
    if tenant_id[0] == "_" or any(not (0x20 <= ord(c) < 0x7F) for c in tenant_id):
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS,
            f"tenant_id {tenant_id!r}: printable ASCII, not starting with '_'",
        )
    return tenant_id


def scoped_prefix(tenant_id: str, prefix: str) -> str:
    """A block hash as the index of tenant ``tenant_id`` names it."""
    return prefix if tenant_id == DEFAULT_TENANT or not prefix else _head(tenant_id) + prefix


def _head(tenant_id: str) -> str:
    return SCOPE + tenant_id + SCOPE


class TenantScope:
    """The object RPCs of one tenant: keys (and parent hashes) scoped in, scoped out."""

    def __init__(
        self, config: Config, objects: Objects, puts: Puts, upserts: Upserts, tenant_id: str
    ) -> None:
        self.objects = objects
        self.puts = puts
        self.upserts = upserts
        self.tenant = check_tenant(tenant_id, config.max_key_length)
        self.head = "" if self.tenant == DEFAULT_TENANT else _head(self.tenant)

    # ------------------------------------------------------------------ mapping
    def key(self, key: object) -> Any:
        """The internal key (anything not a string goes on to the store's own check)."""
        if not isinstance(key, str) or not key:
            return key  # the store's own check answers it (an empty key stays empty)
        if not self.head and key.startswith(SCOPE) and split_scoped(key) is not None:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, "key: a default key may not have a tenant key's form"
            )
        return self.head + key

    def mine(self, internal: str) -> str | None:
        """The user key of an internal key of this tenant, else None."""
        if not self.head:
            return internal if split_scoped(internal) is None else None
        return internal[len(self.head) :] if internal.startswith(self.head) else None

    def config(self, config: ConfigArg) -> ReplicateConfig:
        cfg = ReplicateConfig.coerce(config)
        if not self.head or not cfg.parent_block_hash:
            return cfg
        return ReplicateConfig.from_dict(
            {
                **cfg.to_dict(),
                "parent_block_hash": scoped_prefix(self.tenant, cfg.parent_block_hash),
            }
        )

    def configs(self, config: ConfigArg | Sequence[ConfigArg], n: int) -> Any:
        if isinstance(config, (list, tuple)):
            if len(config) != n:  # as the unscoped batch_put_start
                raise MooncakeError(ErrorCode.INVALID_PARAMS, "config: one per key")
            return [self.config(c) for c in config]
        return self.config(config)  # type: ignore[arg-type]

    async def each(
        self, keys: Sequence[str], call: Callable[[list[Any], list[int]], Any]
    ) -> list[Any]:
        """Runs ``call(internal keys, their indexes)`` over the keys that map; the others
        answer their error in place (a batch answers per key)."""
        head = self.head
        if all(type(k) is str and k and k[0] != SCOPE for k in keys):  # the hot path
            mapped_all = [head + k for k in keys] if head else list(keys)
            return list(await call(mapped_all, list(range(len(keys)))))
        out: list[Any] = [None] * len(keys)
        mapped: list[Any] = []
        where: list[int] = []
        for i, k in enumerate(keys):
            try:
                mapped.append(self.key(k))
                where.append(i)
            except MooncakeError as exc:
                out[i] = exc
        if mapped:
            for i, r in zip(where, await call(mapped, where)):
                out[i] = r
        return out

    # ------------------------------------------------------------------ reads
    async def exist_key(self, key: str) -> bool:
        return bool(await self.objects.exist_key(self.key(key)))

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        return await self.each(keys, lambda ks, _: self.objects.batch_exist_key(ks))

    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        res: GetReplicaListResponse = await self.objects.get_replica_list(self.key(key))
        return res

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        return await self.each(keys, lambda ks, _: self.objects.batch_get_replica_list(ks))

    # ------------------------------------------------------------------ puts and upserts
    async def _start(
        self,
        method: Any,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg],
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        if not isinstance(keys, (list, tuple)) or len(keys) != len(slice_lengths):
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, "keys, slice_lengths: lists of the same length"
            )
        cfg = self.configs(config, len(keys))

        def call(ks: list[Any], where: list[int]) -> Any:
            c = [cfg[i] for i in where] if isinstance(cfg, list) else cfg
            return method(client_id, ks, [slice_lengths[i] for i in where], c)

        return await self.each(keys, call)

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        return await self._start(self.puts.batch_put_start, client_id, keys, slice_lengths, config)

    async def batch_upsert_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        return await self._start(
            self.upserts.batch_upsert_start, client_id, keys, slice_lengths, config
        )

    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        return _one(await self.batch_put_start(client_id, [key], [slice_lengths], config))

    async def upsert_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        return _one(await self.batch_upsert_start(client_id, [key], [slice_lengths], config))

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.each(
            keys, lambda ks, _: self.puts.batch_put_end(client_id, ks, replica_type)
        )

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.each(
            keys, lambda ks, _: self.puts.batch_put_revoke(client_id, ks, replica_type)
        )

    # Mooncake's UpsertEnd / UpsertRevoke are its PutEnd / PutRevoke.
    batch_upsert_end = batch_put_end
    batch_upsert_revoke = batch_put_revoke

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        _none(await self.batch_put_end(client_id, [key], replica_type))

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        _none(await self.batch_put_revoke(client_id, [key], replica_type))

    upsert_end = put_end
    upsert_revoke = put_revoke

    # ------------------------------------------------------------------ removal and regex
    async def remove(self, key: str, force: bool = False) -> None:
        await self.objects.remove(self.key(key), force)

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        return await self.each(keys, lambda ks, _: self.objects.batch_remove(ks, force))

    async def _keys(self) -> list[tuple[str, str]]:
        """(internal, user) of every object of this tenant."""
        out: list[tuple[str, str]] = []
        for k in await self.objects.all_object_keys():
            user = self.mine(k)
            if user is not None:
                out.append((k, user))
        return out

    async def _matching(self, pattern: str) -> list[tuple[str, str]]:
        """As the store's regex (search semantics, the same limits), on the user keys."""
        pat = compile_pattern(pattern)
        return search(pat, await self._keys(), lambda item: item[1])

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        found = await self._matching(pattern)
        n: int = await self.objects._remove_skip([k for k, _ in found], force)
        return n

    async def get_replica_list_by_regex(self, pattern: str) -> dict[str, GetReplicaListResponse]:
        found = await self._matching(pattern)
        res = await self.objects.batch_get_replica_list([k for k, _ in found])
        return {u: r for (_, u), r in zip(found, res) if not isinstance(r, MooncakeError)}

    async def remove_all(self, force: bool = False) -> int:
        n: int = await self.objects._remove_skip([k for k, _ in await self._keys()], force)
        return n


def _one(res: list[T | MooncakeError]) -> T:
    [r] = res
    if isinstance(r, MooncakeError):
        raise r
    return r


def _none(res: list[MooncakeError | None]) -> None:
    [r] = res
    if r is not None:
        raise r
