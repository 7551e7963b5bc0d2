"""The one service object: every RPC of the master (store, radix index, eviction) as a method."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import Backend
from .config import Config
from .errors import MooncakeError
from .eviction.mixin import EvictionMixin
from .models import ReplicaDescriptor
from .puts import ConfigArg
from .radix import RadixMixin
from .store import StoreMixin
from .tenants import TenantScope
from .upserts import Upserts


class MasterService(EvictionMixin, StoreMixin, RadixMixin):
    """Stateless: every worker may build one over the same Redis; nothing lives only here."""

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        config: Config | None = None,
        *,
        create: bool = True,
        **redis_kwargs: Any,
    ) -> MasterService:
        """Connects and checks the namespace's recorded settings (recording them on first use).
        ``create=False`` (fsck, inspect): writes nothing, refuses a namespace that does not
        exist (OBJECT_NOT_FOUND) and adopts its recorded shard count and radix setting."""
        config = config or Config()
        backend = Backend.from_url(url or config.redis_url, **redis_kwargs)
        service = cls(backend, config)
        try:
            await backend.connect()
            if create:
                await service._check_meta()
            else:
                await service._open_existing()
        except BaseException:
            await backend.aclose()
            raise
        return service

    # Upsert (upserts.py) and tenants (tenants.py): parts composed on first use.
    @property
    def upserts(self) -> Upserts:
        part: Upserts | None = self.__dict__.get("_upserts")
        if part is None:
            part = self.__dict__["_upserts"] = Upserts(self)
        return part

    def tenant(self, tenant_id: str) -> TenantScope:
        """The object RPCs of one tenant (``"default"``: today's keys, unchanged)."""
        return TenantScope(self, tenant_id)

    async def upsert_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        return await self.upserts.upsert_start(client_id, key, slice_lengths, config)

    async def batch_upsert_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        return await self.upserts.batch_upsert_start(client_id, keys, slice_lengths, config)

    async def upsert_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.upserts.upsert_end(client_id, key, replica_type)

    async def batch_upsert_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.upserts.batch_upsert_end(client_id, keys, replica_type)

    async def upsert_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.upserts.upsert_revoke(client_id, key, replica_type)

    async def batch_upsert_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.upserts.batch_upsert_revoke(client_id, keys, replica_type)

    async def __aenter__(self) -> MasterService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
