"""Leaf scoring policies for radix eviction: lower score = evicted first.

The evictable-leaf index of each shard (``K.leaves``) is ordered by the node field ``s``: the
newest lease timeout granted on any of the leaf's keys (its creation time before the first
lease), maintained by the radix include. That is Mooncake's lease order, so ``lru`` uses it as
is. Tree-aware policies rescore the candidates the evictor reads in index order, from ``s`` and
the hit counter ``h``; a policy must never score a leaf below its ``s`` (a bonus, never a
malus): the evictor then knows that a leaf it has not read yet scores at least the cursor's
``s``, reads further until the best candidate it holds is provably the best of its shard, and a
frequency-favoured old leaf is still chosen once the younger leaves have gone (its bonus is
bounded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config
from ..errors import ErrorCode, MooncakeError


@dataclass(frozen=True)
class LeafPolicy:
    """``lru``: the leaf's newest lease timeout (Mooncake's lease order, leaves only)."""

    name: str = "lru"

    def score(self, s: float, hits: int) -> float:
        return s

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True)
class LruFreqPolicy(LeafPolicy):
    """``lru-freq[:W]``: recency plus a hit-frequency term, s + W * log2(1 + min(h, cap)).

    A leaf read often keeps up to ``W * log2(1 + cap)`` ms of extra life (W defaults to the
    lease ttl: each doubling of the hits is worth one more lease of recency)."""

    name: str = "lru-freq"
    weight_ms: float = 5_000.0
    cap: int = 1024

    def score(self, s: float, hits: int) -> float:
        return s + self.weight_ms * math.log2(1 + min(max(hits, 0), self.cap))

    def describe(self) -> str:
        return f"{self.name}:{self.weight_ms:g}"


POLICY_NAMES = ("lru", "lru-freq")


def get_policy(spec: str, config: Config | None = None) -> LeafPolicy:
    """``lru`` | ``lru-freq`` | ``lru-freq:<weight ms>``."""
    name, _, arg = spec.strip().partition(":")
    if name == "lru" and not arg:
        return LeafPolicy()
    if name == "lru-freq":
        weight = float(config.default_kv_lease_ttl_ms) if config else 5_000.0
        if arg:
            try:
                weight = float(arg)
            except ValueError:
                weight = -1.0
            if not weight >= 0 or math.isinf(weight):
                raise MooncakeError(
                    ErrorCode.INVALID_PARAMS, f"eviction_policy: bad weight in {spec!r}"
                )
        return LruFreqPolicy(weight_ms=weight)
    raise MooncakeError(
        ErrorCode.INVALID_PARAMS,
        f"eviction_policy: unknown policy {spec!r}; expected one of {', '.join(POLICY_NAMES)}",
    )
