"""The ``tiered`` leaf policy of the reference model: leaf-first LRU with three tiers of
protection (fresh, exposed, found); :mod:`.segmented` builds a ghost-list variant on it."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable
from typing import Generic, TypeVar

from mooncake_redis.replay.leafcache import LeafCache, Node

K = TypeVar("K", bound=Hashable)


class Tiered(Generic[K]):
    """``tiered[:F/X/Y]``: leaf-first LRU in logical time with three tiers of protection.

    A leaf's score is the logical time of its last touch (blocks evicted so far, see
    ``LeafCache``) plus a protection in turnovers (one turnover = the blocks stored now):
    F (default 0) for a *fresh* leaf (never found since its put and never extended: no
    evidence of reuse; in a FAST'25 trace usually a prompt's partial last block), X (default 1)
    for an *exposed* one (never found, but it once had a child: a request went past it, so it
    is a full prefix block), Y (default 1.75) for a leaf *found* by a later request at least
    once. Each tier is its own LRU index; a victim is the tier head with the lowest score.
    Bounded (no leaf outlives LRU by more than Y turnovers) and order-based within a tier.
    Fresh leaves rarely live long enough for X to matter (any X >= 0.5 ranks the same on every
    workload of the study); Y - X, the edge of a found leaf over an exposed one, is the knob.

    A fresh leaf put less than ``GRACE_MS`` (100 ms) ago, by the replay's clock, is not a
    victim while an older leaf is: it may be the last block of a put batch whose request goes
    on in the next batch, and evicting it there would refuse the rest of the request as
    orphans (8-10 thousand blocks of the conversation trace)."""

    name = "tiered"
    GRACE_MS = 100.0

    def __init__(self, fresh: float = 0.0, exposed: float = 1.0, found: float = 1.75) -> None:
        if not (min(fresh, exposed, found) >= 0.0 and math.isfinite(fresh + exposed + found)):
            raise ValueError("tier protections must be finite and >= 0")
        self.offsets = (fresh, exposed, found)
        self.cache: LeafCache[K] | None = None
        self._heaps: tuple[list[tuple[int, int, int, int, Node[K]]], ...] = ([], [], [])
        self._seq = itertools.count()

    def bind(self, cache: LeafCache[K]) -> None:
        self.cache = cache

    @staticmethod
    def tier(node: Node[K]) -> int:
        return 2 if node.refs > 0 else (1 if node.fan > 0 else 0)

    def _index(self, node: Node[K]) -> None:
        node.ver += 1
        node.seg = self.tier(node)
        if node.children == 0:
            e = (node.stamp, node.last, next(self._seq), node.ver, node)
            heapq.heappush(self._heaps[node.seg], e)

    def inserted(self, node: Node[K]) -> None:
        self._index(node)

    def touched(self, node: Node[K]) -> None:
        self._index(node)

    def exposed(self, node: Node[K]) -> None:
        self._index(node)

    def requeue(self, node: Node[K]) -> None:
        self._index(node)

    def covered(self, node: Node[K]) -> None:
        node.ver += 1

    def evicted(self, node: Node[K]) -> None:
        return None

    def _head(self, tier: int) -> Node[K] | None:
        h = self._heaps[tier]
        while h:
            _, _, _, ver, node = h[0]
            if node.alive and node.children == 0 and node.ver == ver:
                return node
            heapq.heappop(h)
        return None

    def pop(self) -> Node[K] | None:
        assert self.cache is not None, "bind() first"
        turnover = max(1, len(self.cache.nodes))
        best: tuple[bool, float, int, int] | None = None
        for tier in range(3):
            node = self._head(tier)
            if node is not None:
                young = tier == 0 and node.born_ms + self.GRACE_MS > self.cache.now_ms
                key = (young, node.stamp + self.offsets[tier] * turnover, node.last, tier)
                if best is None or key < best:
                    best = key
        if best is None:
            return None
        return heapq.heappop(self._heaps[best[3]])[4]
