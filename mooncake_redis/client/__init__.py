"""HTTP clients of the master workers: :class:`MasterClient` (blocking) and
:class:`AsyncMasterClient` (asyncio).

Same method names, arguments and return types as :class:`~mooncake_redis.MasterService` (the
methods are generated from the RPC table: :mod:`.generate`); every failure raises
:class:`~mooncake_redis.MooncakeError` with the worker's Mooncake error code (transport failures
are ``RPC_FAIL``). Connections are kept alive per worker (:mod:`.transport`), for less time than
the worker keeps them. Several worker URLs may be given: a connection failure moves to the next.
Retries happen only where they are safe (:mod:`.base`).

Importing this package loads neither the service nor redis: only the RPC types
(:mod:`mooncake_redis.types`) and the RPC table.
"""

from ..types import ConfigArg
from .async_rpcs import AsyncMasterClient
from .sync_rpcs import MasterClient

__all__ = ["AsyncMasterClient", "ConfigArg", "MasterClient"]
