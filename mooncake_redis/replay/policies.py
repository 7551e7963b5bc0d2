"""Leaf policies of the reference model (``--target model --scoring NAME``).

Each one orders the evictable leaves of a ``LeafCache``; the cache keeps the per-node state
(times, hit counts, depth, children) and the store's calling pattern. ``lru`` and ``lru-freq``
are the store's own policies (docs/eviction.md); the others are the candidates measured for a
better default (the issue on eviction policy), in the model's logical time (calls seen), so a
replay ranks blocks the same at any speed. ``make_policy("NAME[:ARG]")`` builds one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from mooncake_redis.replay.leafcache import LeafCache, LeafPolicy, Node
from mooncake_redis.replay.tiered import Tiered

K = TypeVar("K", bound=Hashable)


class HeapPolicy(Generic[K]):
    """One index of leaves by a priority computed at each event of the leaf (lazy deletion:
    an entry is stale once the node was re-indexed, evicted, or got a child)."""

    name = "heap"

    def __init__(self) -> None:
        self.cache: LeafCache[K] | None = None
        self._heap: list[tuple[float, int, int, int, Node[K]]] = []
        self._seq = itertools.count()

    def bind(self, cache: LeafCache[K]) -> None:
        self.cache = cache

    @property
    def c(self) -> LeafCache[K]:
        assert self.cache is not None, "bind() first"
        return self.cache

    def priority(self, node: Node[K]) -> float:
        """Lower goes first (ties: least recently used first); called when the leaf is put,
        hit or exposed."""
        return float(node.last)

    def _push(self, node: Node[K]) -> None:
        node.ver += 1
        heapq.heappush(self._heap, (node.key, node.last, next(self._seq), node.ver, node))
        if len(self._heap) > 4 * len(self.c.nodes) + 1024:
            live = [e for e in self._heap if self._valid(e)]
            heapq.heapify(live)
            self._heap = live

    def _index(self, node: Node[K]) -> None:
        node.key = self.priority(node)
        if node.children == 0:
            self._push(node)

    @staticmethod
    def _valid(e: tuple[float, int, int, int, Node[K]]) -> bool:
        node = e[4]
        return node.alive and node.children == 0 and node.ver == e[3]

    def inserted(self, node: Node[K]) -> None:
        self._index(node)

    def touched(self, node: Node[K]) -> None:
        self._index(node)

    def exposed(self, node: Node[K]) -> None:
        self._index(node)

    def covered(self, node: Node[K]) -> None:
        node.ver += 1  # its entry is stale; its key is kept for when it is a leaf again

    def evicted(self, node: Node[K]) -> None:
        return None

    def pop(self) -> Node[K] | None:
        while self._heap:
            e = heapq.heappop(self._heap)
            if self._valid(e):
                return e[4]
        return None

    def requeue(self, node: Node[K]) -> None:
        self._push(node)


class Lru(HeapPolicy[K]):
    """``lru``: the store's lease order among leaves: by the newest lease timeout granted on
    the leaf (its put time before its first hit), least recently used first. With leases off
    that is plain LRU; with a lease, a block found t ms ago outranks one put less than
    ttl - t ms ago."""

    name = "lru"

    def priority(self, node: Node[K]) -> float:
        return node.s_ms


class LruFreq(HeapPolicy[K]):
    """``lru-freq[:W]``: the store's formula in the replay's wall clock, s + W*log2(1+min(h,
    1024)), with h the store's hit counter (a lease per key) and W the lease ttl by default."""

    name = "lru-freq"

    def __init__(self, weight_ms: float | None = None) -> None:
        super().__init__()
        self.weight_ms = weight_ms

    def priority(self, node: Node[K]) -> float:
        w = self.c.lease_ttl_ms if self.weight_ms is None else self.weight_ms
        return node.s_ms + w * math.log2(1 + min(node.grants, 1024))


class Lru2(HeapPolicy[K]):
    """``lru-2``: LRU-K with K = 2: by the time of the touch before the last; a leaf touched
    once (only put) goes before every leaf touched again (scan resistance)."""

    name = "lru-2"

    def priority(self, node: Node[K]) -> float:
        if node.prev < 0:
            return -1e18 + node.last
        return float(node.prev)


class Lfuda(HeapPolicy[K]):
    """``lfuda``: LFU with dynamic aging (GDSF with unit cost): L + refs, where L is the
    priority of the last victim, so old counts age out as the cache turns over."""

    name = "lfuda"

    def __init__(self) -> None:
        super().__init__()
        self.inflation = 0.0

    def value(self, node: Node[K]) -> float:
        return float(node.refs + 1)

    def priority(self, node: Node[K]) -> float:
        return self.inflation + self.value(node)

    def evicted(self, node: Node[K]) -> None:
        self.inflation = max(self.inflation, node.key)


class GdsfDepth(Lfuda[K]):
    """``gdsf-depth[:B]``: GDSF with a recompute cost growing with depth: L + (refs + 1) * (1 +
    depth / B) (B blocks: the depth at which the cost doubles; default 64)."""

    name = "gdsf-depth"

    def __init__(self, half: float = 64.0) -> None:
        super().__init__()
        self.half = half

    def value(self, node: Node[K]) -> float:
        return (node.refs + 1) * (1.0 + node.depth / self.half)


class AgedScore(HeapPolicy[K]):
    """Recency plus a bonus measured in the cache's own turnover, not in wall time: priority =
    last + A * bonus(node), where A is the age (in calls) of the recent victims, tracked as an
    exponential mean. A leaf with bonus b survives as if it had been touched b turnovers
    later. Subclasses define ``bonus`` (>= 0, bounded)."""

    name = "aged"

    def __init__(self, weight: float = 1.0) -> None:
        super().__init__()
        self.weight = weight
        self.age = 0.0

    def bonus(self, node: Node[K]) -> float:
        return 0.0

    def priority(self, node: Node[K]) -> float:
        return node.last + self.weight * self.age * self.bonus(node)

    def evicted(self, node: Node[K]) -> None:
        a = max(0, self.c.clock - node.last)
        self.age = a if self.age == 0 else 0.999 * self.age + 0.001 * a


class LruLogRefs(AgedScore[K]):
    """``lru-refs[:W]``: bonus log2(1 + min(refs, 1024)) turnovers x W (the frequency term of
    ``lru-freq`` in logical time)."""

    name = "lru-refs"

    def bonus(self, node: Node[K]) -> float:
        return math.log2(1 + min(node.refs, 1024))


class LruFan(AgedScore[K]):
    """``lru-fan[:W]``: bonus log2(fan) turnovers x W: a node that had several children is a
    shared prefix (a system prompt, a branch point of an agent)."""

    name = "lru-fan"

    def bonus(self, node: Node[K]) -> float:
        return math.log2(max(1, node.fan))


class LruHit(AgedScore[K]):
    """``lru-hit[:W]``: bonus W turnovers for a leaf found at least once since its put (a
    two-class recency order: re-referenced leaves live W turnovers longer)."""

    name = "lru-hit"

    def bonus(self, node: Node[K]) -> float:
        return 1.0 if node.refs > 0 else 0.0


class LruTree(AgedScore[K]):
    """``lru-tree[:W]``: bonus log2(1 + refs) + log2(fan): frequency and sharing together."""

    name = "lru-tree"

    def bonus(self, node: Node[K]) -> float:
        return math.log2(1 + min(node.refs, 1024)) + math.log2(max(1, node.fan))


def _tiered(arg: str) -> Tiered[Any]:
    if not arg:
        return Tiered()
    parts = arg.split("/")
    if len(parts) not in (3, 4):
        raise ValueError(
            "expected tiered:FRESH/EXPOSED/FOUND[/GRACE] (turnovers; the put grace in blocks "
            "evicted, 1 = put since the last pass), e.g. tiered:0/1/1.5"
        )
    return Tiered(*(float(p) for p in parts))


def _float_arg(cls: Callable[..., Any]) -> Callable[[str], Any]:
    return lambda arg: cls(float(arg)) if arg else cls()


_EXTRA: dict[str, Callable[[str], Any]] = {}


def register_policy(name: str, factory: Callable[[str], Any]) -> None:
    """Add (or replace) a policy: ``factory(arg)`` builds it from the text after ``NAME:``."""
    _EXTRA[name] = factory


def _registry() -> dict[str, Callable[[str], Any]]:
    from mooncake_redis.replay import segmented

    return {
        "lru": lambda arg: Lru(),
        "lru-freq": lambda arg: LruFreq(float(arg) if arg else None),
        "lru-2": lambda arg: Lru2(),
        "lfuda": lambda arg: Lfuda(),
        "gdsf-depth": _float_arg(GdsfDepth),
        "lru-refs": _float_arg(LruLogRefs),
        "lru-fan": _float_arg(LruFan),
        "lru-hit": _float_arg(LruHit),
        "lru-tree": _float_arg(LruTree),
        "tiered": _tiered,
        **segmented.REGISTRY,
        **_EXTRA,
    }


def policy_names() -> list[str]:
    return list(_registry())


def make_policy(spec: str) -> LeafPolicy[Any]:
    """``NAME`` or ``NAME:ARG`` (see each policy); ValueError for an unknown name or bad arg."""
    name, _, arg = spec.strip().partition(":")
    factory = _registry().get(name)
    if factory is None:
        raise ValueError(
            f"unknown scoring policy {spec!r}; expected one of {', '.join(policy_names())}"
        )
    try:
        policy: LeafPolicy[Any] = factory(arg)
    except ValueError as exc:
        raise ValueError(f"bad argument in scoring policy {spec!r}: {exc}") from exc
    return policy
