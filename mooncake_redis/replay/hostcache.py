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

    def tick(self) -> int:
        """Advance the clock; blocks touched with this stamp count as one access."""
        self._clock += 1
        return self._clock

    def touch(self, block: K, stamp: int | None = None) -> bool:
        """Mark a cached block used now; False if it is not cached."""
        entry = self._entries.get(block)
        if entry is None:
            return False
        entry.stamp = self._clock if stamp is None else stamp
        self._push_if_leaf(block, entry)
        return True

    def add(self, block: K, parent: K | None, stamp: int | None = None) -> None:
        """Insert a block under its parent (a missing parent makes it a root); no capacity check."""
        if block in self._entries:
            self.touch(block, stamp)
            return
        if parent is not None and parent not in self._entries:
            parent = None
        entry = _Entry(parent, stamp=self._clock if stamp is None else stamp)
        self._entries[block] = entry
        if parent is not None:
            self._entries[parent].children += 1
        self._push_if_leaf(block, entry)
        if len(self._heap) > 4 * len(self._entries) + 1024:
            self._compact()

    def pop_leaf(self, protect_stamp: int | None = None) -> K | None:
        """Drop the LRU leaf touched before protect_stamp (any leaf if None); None if none."""
        limit = self._clock + 1 if protect_stamp is None else protect_stamp
        while self._heap:
            stamp, _, block = self._heap[0]
            entry = self._entries.get(block)
            if entry is None or entry.stamp != stamp or entry.children:
                heapq.heappop(self._heap)
                continue
            if stamp >= limit:
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
        stamp = self.tick()
        evicted: list[K] = []
        parent: K | None = None
        for block in chain:
            if not self.touch(block, stamp):
                if self.capacity <= 0:
                    break
                while len(self._entries) >= self.capacity:
                    victim = self.pop_leaf(stamp)
                    if victim is None:
                        return evicted
                    evicted.append(victim)
                self.add(block, parent, stamp)
            parent = block
        return evicted

    def _compact(self) -> None:
        self._heap = [
            (e.stamp, i, b) for i, (b, e) in enumerate(self._entries.items()) if e.children == 0
        ]
        heapq.heapify(self._heap)
        self._seq = len(self._heap)


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
