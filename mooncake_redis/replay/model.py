"""Reference models of the two eviction policies, in process and in memory.

They make the demo and the tests runnable without Redis or Mooncake, and give a baseline to hold
the real stores against: "batch-evict" is Mooncake's parent-unaware batch eviction with lease
order approximated by last access; "radix" evicts whole leaf blocks, least recently used first.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from mooncake_redis.replay.hostcache import LeafFirstLRU
from mooncake_redis.replay.target import PutItem, ReplayTarget, TargetOptions
from mooncake_redis.replay.trace import block_of_key

POLICIES = ("radix", "batch-evict")


class ModelTarget:
    """A dict store with a capacity in objects and one of the two eviction policies."""

    def __init__(self, options: TargetOptions) -> None:
        if options.policy not in POLICIES:
            raise ValueError(f"unknown policy {options.policy!r}; expected one of {POLICIES}")
        if options.policy == "radix" and options.scoring != "lru":
            raise ValueError(f"the model target scores leaves by lru only, not {options.scoring!r}")
        self.name = f"model/{options.policy}"
        self.value_size = options.value_size
        self.policy = options.policy
        self.capacity = options.capacity_blocks * options.objects_per_block
        self.high_watermark = options.eviction_high_watermark_ratio
        self.ratio = options.eviction_ratio
        self._lru: OrderedDict[str, None] = OrderedDict()  # batch-evict: objects by last access
        self._blocks: dict[str, set[str]] = {}  # radix: block -> its stored keys
        self._tree: LeafFirstLRU[str] = LeafFirstLRU(0)
        self._count = 0
        self.c = {"evictions": 0, "evicted_keys": 0, "bytes_evicted": 0, "removed": 0}

    def _has(self, key: str) -> bool:
        if self.policy == "batch-evict":
            return key in self._lru
        keys = self._blocks.get(block_of_key(key))
        return keys is not None and key in keys

    def _touch(self, keys: list[str]) -> list[bool]:
        stamp = self._tree.tick()
        out = []
        for k in keys:
            hit = self._has(k)
            out.append(hit)
            if hit and self.policy == "batch-evict":
                self._lru.move_to_end(k)
            elif hit:
                self._tree.touch(block_of_key(k), stamp)
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

    def _evict_leaf(self) -> bool:
        block = self._tree.pop_leaf()
        if block is None:
            return False
        keys = self._blocks.pop(block)
        self._count -= len(keys)
        self.c["evictions"] += 1
        self.c["evicted_keys"] += len(keys)
        self.c["bytes_evicted"] += len(keys) * self.value_size
        return True

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        stamp = self._tree.tick()
        out = []
        for it in items:
            if self._has(it.key):
                out.append(False)  # a put never overwrites
                continue
            if self.policy == "batch-evict":
                if self._count >= self.capacity * self.high_watermark:
                    self._evict_batch()
                self._lru[it.key] = None
                self._count += 1
                out.append(True)
                continue
            # Same watermark as batch-evict, so the two differ only in what they evict.
            while self._count >= self.capacity * self.high_watermark:
                if not self._evict_leaf():
                    break
            if self._count >= self.capacity:
                out.append(False)
                continue
            block = block_of_key(it.key)
            self._tree.add(block, it.parent_block_hash or None, stamp)
            self._blocks.setdefault(block, set()).add(it.key)
            self._count += 1
            out.append(True)
        return out

    async def stored_keys(self) -> set[str]:
        if self.policy == "batch-evict":
            return set(self._lru)
        return {k for keys in self._blocks.values() for k in keys}

    async def counters(self) -> dict[str, int]:
        return dict(self.c)

    async def close(self) -> None:
        return None


async def create_model_target(options: TargetOptions) -> ReplayTarget:
    """Registry factory for the reference models."""
    return ModelTarget(options)
