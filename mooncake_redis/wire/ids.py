"""Mooncake identifies clients and segments by a 128-bit UUID (``std::pair<uint64_t,
uint64_t>``); the store by strings. The mapping is the canonical UUID text of the 128-bit number
``first << 64 | second``: ``UUID(0x0123456789abcdef, 0xfedcba9876543210)`` is
``"01234567-89ab-cdef-fedc-ba9876543210"``. It is fixed and reversible, so every worker maps
a client to the same id and ``inspect`` output can be matched against the client's own logs.
"""

from __future__ import annotations

import uuid

from .types import UUID


def uuid_str(u: UUID | tuple[int, int]) -> str:
    return str(uuid.UUID(int=(u[0] << 64) | u[1]))


def uuid_of(text: str) -> UUID:
    n = uuid.UUID(text).int
    return UUID(n >> 64, n & 0xFFFFFFFFFFFFFFFF)
