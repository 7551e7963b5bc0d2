"""mooncake-redis: the Mooncake Store master's metadata and a radix-tree prefix index on Redis."""

from .config import Config
from .errors import ErrorCode, MooncakeError
from .radix import RadixNode, RegisterItem, SubtreeResult
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
