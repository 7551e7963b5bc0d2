"""Engine host caches for tiered replays: leaf-first LRU over blocks, random request routing.

In a tiered deployment an engine serves its own host-cache prefix hit locally and asks the shared
store only for the blocks after it, so the store never refreshes the hot prefixes the engines
hold. Modelling that is what exposes parent-unaware eviction in the store.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry(Generic[K]):
    parent: K | None
    children: int = 0
    stamp: int = 0


@dataclass
class LeafFirstLRU(Generic[K]):
    """A prefix-closed block cache: evicts only blocks with no cached child, LRU first.

    A heap with lazy deletion keeps eviction O(log n) per victim: stale heap entries (block
    gone, re-touched, or no longer a leaf) are skipped when popped.
    """

    capacity: int
    _entries: dict[K, _Entry[K]] = field(default_factory=dict)
    _heap: list[tuple[int, int, K]] = field(default_factory=list)
    _clock: int = 0
    _seq: int = 0
    evictions: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, block: object) -> bool:
        return block in self._entries

    def match(self, chain: Sequence[K]) -> int:
        """Length of the chain's leading run that is cached (the host-cache prefix hit)."""
        n = 0
        for b in chain:
            if b not in self._entries:
                break
            n += 1
        return n

    def _push_if_leaf(self, block: K, entry: _Entry[K]) -> None:
        if entry.children == 0:
            self._seq += 1
            heapq.heappush(self._heap, (entry.stamp, self._seq, block))

    def _evict_one(self, protect_stamp: int) -> K | None:
        """Drop the LRU leaf touched before protect_stamp; None if every leaf is newer."""
        while self._heap:
            stamp, _, block = self._heap[0]
            entry = self._entries.get(block)
            if entry is None or entry.stamp != stamp or entry.children:
                heapq.heappop(self._heap)
                continue
            if stamp >= protect_stamp:
                return None
            heapq.heappop(self._heap)
            del self._entries[block]
            self.evictions += 1
            if entry.parent is not None:
                parent = self._entries.get(entry.parent)
                if parent is not None:
                    parent.children -= 1
                    self._push_if_leaf(entry.parent, parent)
            return block
        return None

    def access(self, chain: Sequence[K]) -> list[K]:
        """Touch the chain and insert what is missing; returns the evicted blocks.

        All of the chain shares one stamp, so its own blocks are never victims of its insertion;
        a chain longer than the capacity leaves only its leading part cached.
        """
        self._clock += 1
        stamp = self._clock
        evicted: list[K] = []
        parent: K | None = None
        for block in chain:
            entry = self._entries.get(block)
            if entry is None:
                if self.capacity <= 0:
                    break
                while len(self._entries) >= self.capacity:
                    victim = self._evict_one(stamp)
                    if victim is None:
                        return evicted
                    evicted.append(victim)
                entry = _Entry(parent)
                self._entries[block] = entry
                if parent is not None:
                    self._entries[parent].children += 1
            entry.stamp = stamp
            self._push_if_leaf(block, entry)
            parent = block
        if len(self._heap) > 4 * len(self._entries) + 1024:
            self._compact()
        return evicted

    def _compact(self) -> None:
        self._heap = [
            (e.stamp, i, b) for i, (b, e) in enumerate(self._entries.items()) if e.children == 0
        ]
        heapq.heapify(self._heap)
        self._seq = len(self._heap)

    def remove_leaf(self) -> K | None:
        """Evict the LRU leaf regardless of recency (for stores that must free space)."""
        return self._evict_one(self._clock + 1)


class EngineFleet:
    """N engines with their own host caches; requests are routed at random (seeded)."""

    def __init__(self, engines: int, host_cache_blocks: int, seed: int = 0) -> None:
        if engines < 1:
            raise ValueError("engines must be >= 1")
        self.caches: list[LeafFirstLRU[int]] = [
            LeafFirstLRU(host_cache_blocks) for _ in range(engines)
        ]
        self._rng = random.Random(seed)

    def route(self) -> int:
        """The engine that serves the next request."""
        return self._rng.randrange(len(self.caches))
