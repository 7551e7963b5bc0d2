"""The one service object: every RPC of the master (store, radix index, eviction) as a method."""

from __future__ import annotations

from typing import Any

from .backend import Backend
from .config import Config
from .eviction.mixin import EvictionMixin
from .radix import RadixMixin
from .store import StoreMixin


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

    async def __aenter__(self) -> MasterService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
