"""mooncake-redis: the Mooncake Store master's metadata and a radix-tree prefix index on Redis.

``MasterService`` is imported on first use, so that ``import mooncake_redis.client`` (and
``.types``) load neither the service nor redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import Config
from .errors import ErrorCode, MooncakeError
from .types import RadixNode, RegisterItem, SubtreeResult

if TYPE_CHECKING:
    from .service import MasterService

__all__ = [
    "Config",
    "ErrorCode",
    "MasterService",
    "MooncakeError",
    "RadixNode",
    "RegisterItem",
    "SubtreeResult",
]


def __getattr__(name: str) -> Any:
    if name == "MasterService":
        from .service import MasterService

        return MasterService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
