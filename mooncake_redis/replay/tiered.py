"""The ``tiered`` leaf policy of the reference model: leaf-first LRU with three tiers of
protection (fresh, exposed, found), making the store's choices (``eviction/policy.py``
``TieredPolicy``); :mod:`.segmented` builds a ghost-list variant on it."""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from mooncake_redis.replay.leafcache import LeafCache, Node

K = TypeVar("K", bound=Hashable)


class Tiered(Generic[K]):
    """``tiered[:F/X/Y[/G]]``: leaf-first LRU in logical time with three tiers of protection.

    A leaf's score is the logical time of its last touch (``Node.stamp``: blocks evicted so
    far) plus a protection in turnovers (one turnover = the blocks stored after the last pass,
    ``LeafCache.turnover``), fixed when the leaf is indexed (put, hit, exposed), as the store's
    leaves index is scored: F (default 0) for a *fresh* leaf (never found since its put and
    never extended: no evidence of reuse; in a FAST'25 trace usually a prompt's partial last
    block), X (default 1) for an *exposed* one (never found, but a put of a child was tried
    under it: a request went past it, so it is a full prefix block), Y (default 1.75) for a
    leaf *found* by a later request at least once. Equal scores go by block name (the index's member
    order). Bounded (no leaf outlives LRU by more than Y turnovers). Fresh leaves rarely live
    long enough for X to matter; Y - X, the edge of a found leaf over an exposed one, is the
    knob.

    The put grace, in the same logical time: a fresh leaf whose stamp is less than G blocks
    (default ``GRACE``, 1) behind the clock the last pass published
    (``LeafCache.published_clock``) is not a victim while a leaf that is not young is. With
    G = 1: a leaf put since the last pass. It may be the last block of a put batch whose
    request goes on in the next batch, and evicting it there would refuse the rest of the
    request (the put guard: 8-10 thousand blocks of the conversation trace). G = 0: no grace."""

    name = "tiered"
    GRACE = 1.0

    def __init__(
        self,
        fresh: float = 0.0,
        exposed: float = 1.0,
        found: float = 1.75,
        grace: float = GRACE,
    ) -> None:
        values = (fresh, exposed, found, grace)
        if not (min(values) >= 0.0 and math.isfinite(sum(values))):
            raise ValueError("tier protections and grace must be finite and >= 0")
        self.offsets = (fresh, exposed, found)
        self.grace = grace
        self.cache: LeafCache[K] | None = None
        self._heap: list[tuple[float, Any, int, Node[K]]] = []

    def bind(self, cache: LeafCache[K]) -> None:
        self.cache = cache

    @staticmethod
    def tier(node: Node[K]) -> int:
        return 2 if node.refs > 0 else (1 if node.linked else 0)

    def linked(self, node: Node[K]) -> None:
        """A put of a child was tried under it: a leaf still (the child may be refused) goes
        to the exposed tier now, as the store re-indexes it when it rolls the refusal back."""
        if node.children == 0:
            self._index(node)

    def _index(self, node: Node[K]) -> None:
        assert self.cache is not None, "bind() first"
        node.ver += 1
        node.seg = self.tier(node)
        node.key = node.stamp + self.offsets[node.seg] * self.cache.turnover
        if node.children == 0:
            heapq.heappush(self._heap, (node.key, node.block, node.ver, node))
        if len(self._heap) > 4 * len(self.cache.nodes) + 1024:
            live = [e for e in self._heap if self._valid(e)]
            heapq.heapify(live)
            self._heap = live

    @staticmethod
    def _valid(e: tuple[float, Any, int, Node[K]]) -> bool:
        node = e[3]
        return node.alive and node.children == 0 and node.ver == e[2]

    def inserted(self, node: Node[K]) -> None:
        self._index(node)

    def touched(self, node: Node[K]) -> None:
        self._index(node)

    def exposed(self, node: Node[K]) -> None:
        self._index(node)

    def requeue(self, node: Node[K]) -> None:
        heapq.heappush(self._heap, (node.key, node.block, node.ver, node))

    def covered(self, node: Node[K]) -> None:
        node.ver += 1

    def evicted(self, node: Node[K]) -> None:
        return None

    def young(self, node: Node[K]) -> bool:
        assert self.cache is not None, "bind() first"
        return node.seg == 0 and self.cache.published_clock - node.stamp < self.grace

    def pop(self) -> Node[K] | None:
        """The best leaf that is not young; the best young one when every leaf is."""
        young: list[tuple[float, Any, int, Node[K]]] = []
        got: Node[K] | None = None
        while self._heap:
            e = heapq.heappop(self._heap)
            if not self._valid(e):
                continue
            if self.young(e[3]):
                young.append(e)
                continue
            got = e[3]
            break
        if got is None and young:
            got = young.pop(0)[3]
        for e in young:
            heapq.heappush(self._heap, e)
        return got
