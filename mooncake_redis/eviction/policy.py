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

``tiered`` scores the index itself, in the store's logical time (blocks evicted so far, see
``TieredPolicy``): its index score is already the policy's score, so the walk reads in policy
order and the cost of a pass follows what it evicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config
from ..errors import ErrorCode, MooncakeError
from ..lua_calls import LeafRow


@dataclass(frozen=True)
class LeafPolicy:
    """``lru``: the leaf's newest lease timeout (Mooncake's lease order, leaves only)."""

    name: str = "lru"

    ties_by_name = False
    """whether equal scores go in the index's member order (exact merge of the shards)"""

    def score(self, s: float, hits: int) -> float:
        return s

    def candidate_score(self, row: LeafRow) -> float:
        """The policy's score of a candidate the evictor read."""
        return self.score(row.score, row.hits)

    def young(self, row: LeafRow) -> bool:
        """Whether the leaf goes only after every leaf that is not young."""
        return False

    def tier_offsets(self) -> str:
        """What the radix include scores the leaves index with ('' = by s)."""
        return ""

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


@dataclass(frozen=True)
class TieredPolicy(LeafPolicy):
    """``tiered[:F/X/Y[/G]]``: leaf-first LRU in logical time with three tiers of protection.

    The store's logical clock is the number of blocks evicted so far and a turnover T is the
    blocks stored, both published by the evictor after each pass (``evict_publish``). A put or
    a hit stamps the node with the clock (k); the leaves index scores a leaf k + P x T at each
    index event (``radix_leaf_score``), P = F (default 0) for a *fresh* leaf (never found, never
    extended: in the FAST'25 traces mostly a prompt's partial last block), X (1) for an
    *exposed* one (a put of a child was tried under it: a full prefix block a request went past;
    the mark is made when the child is linked, room or not), Y (1.75) for
    one *found* by a later request. Bounded (no leaf outlives LRU by more than Y turnovers) and
    independent of the replay's or the clients' speed.

    The put grace, in the same logical time: a fresh leaf whose stamp is less than G blocks
    (default 1) behind its shard's published clock is *young* and goes only after every leaf
    that is not. With G = 1 that is exactly a leaf put since the evictor's last pass (the clock
    moves only when a pass publishes what it evicted): it may be the last block of a put batch
    whose request goes on in the next batch, and evicting it would refuse the rest of the
    request (the put guard), however long a batch takes. G = 0: no grace. The reference model's
    ``tiered`` makes the same choices (tests/test_replay_store.py); why it wins:
    docs/eviction.md."""

    name: str = "tiered"
    fresh: float = 0.0
    exposed: float = 1.0
    found: float = 1.75
    grace: float = 1.0
    """in blocks evicted (logical time): 1 = put since the last pass, 0 = no grace"""
    ties_by_name = True

    def candidate_score(self, row: LeafRow) -> float:
        return row.zscore

    def young(self, row: LeafRow) -> bool:
        return row.hits <= 0 and not row.exposed and row.clock - row.stamp < self.grace

    def tier_offsets(self) -> str:
        return f"{self.fresh!r}/{self.exposed!r}/{self.found!r}"

    def describe(self) -> str:
        out = f"{self.name}:{self.fresh:g}/{self.exposed:g}/{self.found:g}"
        return out + (f"/{self.grace:g}" if self.grace != 1.0 else "")


def _tiered(spec: str, arg: str) -> TieredPolicy:
    parts = arg.split("/") if arg else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = [-1.0]
    if (parts and len(parts) not in (3, 4)) or not all(v >= 0 and math.isfinite(v) for v in values):
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS,
            f"eviction_policy: expected tiered[:FRESH/EXPOSED/FOUND[/GRACE]] with finite "
            f"values >= 0 (protections in turnovers; the put grace in blocks evicted, 1 = put "
            f"since the last pass, 0 = none), got {spec!r}",
        )
    if not values:
        return TieredPolicy()
    grace = values[3] if len(values) == 4 else 1.0
    return TieredPolicy(fresh=values[0], exposed=values[1], found=values[2], grace=grace)


POLICY_NAMES = ("lru", "lru-freq", "tiered")


def get_policy(spec: str, config: Config | None = None) -> LeafPolicy:
    """``lru`` | ``lru-freq[:<weight ms>]`` | ``tiered[:F/X/Y[/grace blocks]]``."""
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
    if name == "tiered":
        return _tiered(spec, arg)
    raise MooncakeError(
        ErrorCode.INVALID_PARAMS,
        f"eviction_policy: unknown policy {spec!r}; expected one of {', '.join(POLICY_NAMES)}",
    )
