"""Reference models of the two eviction modes, in process and in memory.

They make the demo and the tests runnable without Redis or Mooncake, and give a baseline to hold
the real stores against: "batch-evict" is Mooncake's parent-unaware batch eviction with lease
order approximated by last access; "radix" is our store's leaf-first eviction (``LeafCache``:
whole blocks, the put guard, one pass per put batch down to the watermark) with any leaf policy
of ``policies`` (``--scoring``), so that policies can be ranked here in seconds.

The model follows the replay's clock (``at``): the wall time the request is sent at the
replay's pacing (trace time / speedup; trace time when unpaced), which leases and ``lru-freq``
read. The driver does not sleep for it: an in-memory model needs no real time to pass.
"""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict

from mooncake_redis.replay.leafcache import LeafCache
from mooncake_redis.replay.policies import make_policy
from mooncake_redis.replay.target import PutItem, ReplayTarget, TargetOptions
from mooncake_redis.replay.trace import block_of_key

POLICIES = ("radix", "batch-evict")


class ModelTarget:
    """A dict store with a capacity in objects and one of the two eviction modes."""

    virtual_clock = True

    def __init__(self, options: TargetOptions) -> None:
        if options.policy not in POLICIES:
            raise ValueError(f"unknown policy {options.policy!r}; expected one of {POLICIES}")
        self.policy = options.policy
        self.scoring = options.scoring
        self.name = "model/batch-evict"
        if self.policy == "radix":
            self.name = f"model/radix ({options.scoring})"
        self.value_size = options.value_size
        self.capacity = options.capacity_blocks * options.objects_per_block
        self.high_watermark = options.eviction_high_watermark_ratio
        self.ratio = options.eviction_ratio
        self._lru: OrderedDict[str, None] = OrderedDict()  # batch-evict: objects by last access
        self._count = 0
        self._keys: dict[str, set[str]] = {}  # radix: block -> its stored keys
        self.cache: LeafCache[str] = LeafCache(
            self.capacity,
            make_policy(options.scoring) if self.policy == "radix" else make_policy("lru"),
            high_watermark=options.eviction_high_watermark_ratio,
            eviction_ratio=options.eviction_ratio,
            lease_ttl_ms=float(options.lease_ttl_ms),
        )
        self._evicted = 0
        self.c = {"evictions": 0, "evicted_keys": 0, "bytes_evicted": 0, "removed": 0}

    def at(self, now_ms: float) -> None:
        """The replay's clock for the next request (ms)."""
        self.cache.now_ms = now_ms

    def _touch(self, keys: list[str]) -> list[bool]:
        if self.policy == "batch-evict":
            out = []
            for k in keys:
                hit = k in self._lru
                if hit:
                    self._lru.move_to_end(k)
                out.append(hit)
            return out
        self.cache.tick()
        per_block: defaultdict[str, int] = defaultdict(int)
        out = []
        for k in keys:
            block = block_of_key(k)
            hit = k in self._keys.get(block, ())
            if hit:
                per_block[block] += 1
            out.append(hit)
        for block, n in per_block.items():
            self.cache.touch(block, n)
        return out

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        return self._touch(keys)

    async def batch_get(self, keys: list[str]) -> list[bool]:
        return self._touch(keys)

    def _evict_batch(self) -> None:
        n = min(len(self._lru), max(1, math.ceil(self._count * self.ratio)))
        for _ in range(n):
            self._lru.popitem(last=False)
        self._count = len(self._lru)
        self.c["evictions"] += 1
        self.c["evicted_keys"] += n
        self.c["bytes_evicted"] += n * self.value_size

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        if self.policy == "batch-evict":
            out = []
            for it in items:
                if it.key in self._lru:
                    out.append(False)  # a put never overwrites
                    continue
                if self._count >= self.capacity * self.high_watermark:
                    self._evict_batch()
                self._lru[it.key] = None
                self._count += 1
                out.append(True)
            return out
        return self._put_blocks(items)

    def _put_blocks(self, items: list[PutItem]) -> list[bool]:
        """Items grouped by block (a block's keys go together, in the batch's order)."""
        self.cache.tick()
        groups: dict[str, list[int]] = {}
        parents: dict[str, str] = {}
        for i, it in enumerate(items):
            block = block_of_key(it.key)
            groups.setdefault(block, []).append(i)
            parents.setdefault(block, it.parent_block_hash)
        out = [False] * len(items)
        todo = []
        for block, idx in groups.items():
            if block in self.cache:
                continue  # a put never overwrites (a stored block is stored whole)
            todo.append((block, parents[block] or None, len(idx)))
        before = self.cache.c.evicted_objects
        stored = self.cache.put(todo)
        for (block, _, _), ok in zip(todo, stored):
            if ok:
                idx = groups[block]
                self._keys[block] = {items[i].key for i in idx}
                for i in idx:
                    out[i] = True
        evicted = self.cache.c.evicted_objects - before
        for block in self.cache.drain_evicted():
            self._keys.pop(block, None)
        if evicted:
            self.c["evictions"] += 1
            self.c["evicted_keys"] += evicted
            self.c["bytes_evicted"] += evicted * self.value_size
        return out

    async def stored_keys(self) -> set[str]:
        if self.policy == "batch-evict":
            return set(self._lru)
        return {k for keys in self._keys.values() for k in keys}

    async def counters(self) -> dict[str, int]:
        return dict(self.c)

    async def close(self) -> None:
        return None


async def create_model_target(options: TargetOptions) -> ReplayTarget:
    """Registry factory for the reference models."""
    return ModelTarget(options)
