"""Segmented leaf policies of the reference model: 2Q, ARC and S3-FIFO, restricted to leaves.

Each keeps the blocks in segments (with sizes counted in blocks over every stored block, as
the original algorithms count pages) and evicts from the segment its rule names, taking that
segment's oldest *leaf*; when the segment has no leaf, the other one gives the victim. Ghosts
are the hashes of recently evicted blocks (no data): a put of a block found there is a miss a
larger cache would have hit, which is how ARC tunes itself and how 2Q and S3-FIFO admit a
returning block straight to their main segment. Time is the cache's call clock.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from mooncake_redis.replay.leafcache import LeafCache, Node
from mooncake_redis.replay.tiered import Tiered

K = TypeVar("K", bound=Hashable)

_Entry = tuple[float, int, int, Node[Any]]


class Segments(Generic[K]):
    """Per segment a lazy heap by key; ``leaves_only`` heaps index leaves only (victims);
    otherwise every node (S3-FIFO moves inner nodes between its queues too)."""

    name = "segments"
    count = 2
    leaves_only = True

    def __init__(self) -> None:
        self.cache: LeafCache[K] | None = None
        self.heaps: list[list[_Entry]] = [[] for _ in range(self.count)]
        self.size = [0] * self.count
        self._seq = itertools.count()

    @property
    def c(self) -> LeafCache[K]:
        assert self.cache is not None, "bind() first"
        return self.cache

    def bind(self, cache: LeafCache[K]) -> None:
        self.cache = cache

    def blocks(self) -> int:
        """The capacity in blocks that the segment targets are fractions of."""
        return max(1, len(self.c.nodes))

    def place(self, node: Node[K], seg: int, key: float) -> None:
        """Put the node into seg at key (its place in the segment's order); a node not yet
        placed has ver 0."""
        if node.ver:
            self.size[node.seg] -= 1
        node.seg, node.key = seg, key
        self.size[seg] += 1
        node.ver += 1
        if node.children == 0 or not self.leaves_only:
            heapq.heappush(self.heaps[seg], (key, next(self._seq), node.ver, node))

    def head(self, seg: int) -> Node[K] | None:
        """The oldest valid node of seg (a leaf, for leaves_only heaps), left in place."""
        h = self.heaps[seg]
        while h:
            _, _, ver, node = h[0]
            ok = node.alive and node.ver == ver
            if ok and (node.children == 0 or not self.leaves_only):
                return node
            heapq.heappop(h)
        return None

    def take(self, seg: int) -> None:
        heapq.heappop(self.heaps[seg])

    def pop_from(self, first: int) -> Node[K] | None:
        """The head of segment ``first``, else of the other one, taken out of its heap."""
        for seg in (first, 1 - first):
            node = self.head(seg)
            if node is not None:
                self.take(seg)
                return node
        return None

    # -- LeafPolicy events shared by all ----------------------------------------------------
    def covered(self, node: Node[K]) -> None:
        if self.leaves_only:
            node.ver += 1  # no longer a victim; its segment and key are kept

    def exposed(self, node: Node[K]) -> None:
        self.reindex(node)

    def requeue(self, node: Node[K]) -> None:
        self.reindex(node)

    def reindex(self, node: Node[K]) -> None:
        node.ver += 1
        heapq.heappush(self.heaps[node.seg], (node.key, next(self._seq), node.ver, node))

    def evicted(self, node: Node[K]) -> None:
        self.size[node.seg] -= 1


class Ghosts(Generic[K]):
    """Recently evicted hashes in eviction order, bounded."""

    def __init__(self) -> None:
        self._d: OrderedDict[K, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._d)

    def add(self, block: K) -> None:
        self._d[block] = None
        self._d.move_to_end(block)

    def take(self, block: K) -> bool:
        return self._d.pop(block, 0) is None

    def trim(self, n: int) -> None:
        while len(self._d) > max(0, n):
            self._d.popitem(last=False)


class TwoQ(Segments[K]):
    """``2q[:KIN]``: new blocks enter A1in (FIFO, at most KIN of the blocks, default 0.25); a
    block evicted from it is remembered in A1out (half the blocks); a put of a block found
    there goes to Am (LRU), as does nothing else. Victims: A1in's oldest leaf while A1in is
    over KIN, else Am's least recently used leaf."""

    name = "2q"

    def __init__(self, kin: float = 0.25) -> None:
        super().__init__()
        self.kin = kin
        self.ghosts: Ghosts[K] = Ghosts()

    def inserted(self, node: Node[K]) -> None:
        seg = 1 if self.ghosts.take(node.block) else 0
        self.place(node, seg, float(self.c.clock))

    def touched(self, node: Node[K]) -> None:
        if node.seg == 1:
            self.place(node, 1, float(self.c.clock))

    def pop(self) -> Node[K] | None:
        return self.pop_from(0 if self.size[0] > self.kin * self.blocks() else 1)

    def evicted(self, node: Node[K]) -> None:
        super().evicted(node)
        if node.seg == 0:
            self.ghosts.add(node.block)
            self.ghosts.trim(self.blocks() // 2)


class Arc(Segments[K]):
    """``arc``: ARC (Megiddo and Modha) on leaves: T1 holds blocks found once since their put,
    T2 blocks found again, B1/B2 the ghosts of what each lost; a put of a B1 ghost raises the
    target p of T1, of a B2 ghost lowers it (by the ratio of the ghost lists), and both go to
    T2. Victims: T1's least recently used leaf while T1 is over p, else T2's."""

    name = "arc"

    def __init__(self) -> None:
        super().__init__()
        self.p = 0.0
        self.b1: Ghosts[K] = Ghosts()
        self.b2: Ghosts[K] = Ghosts()

    def inserted(self, node: Node[K]) -> None:
        seg = 0
        n1, n2 = max(1, len(self.b1)), max(1, len(self.b2))
        if self.b1.take(node.block):
            self.p = min(float(self.blocks()), self.p + max(1.0, n2 / n1))
            seg = 1
        elif self.b2.take(node.block):
            self.p = max(0.0, self.p - max(1.0, n1 / n2))
            seg = 1
        self.place(node, seg, float(self.c.clock))

    def touched(self, node: Node[K]) -> None:
        self.place(node, 1, float(self.c.clock))

    def pop(self) -> Node[K] | None:
        return self.pop_from(0 if self.size[0] > self.p else 1)

    def evicted(self, node: Node[K]) -> None:
        super().evicted(node)
        c = self.blocks()
        (self.b1 if node.seg == 0 else self.b2).add(node.block)
        self.b1.trim(c - self.size[0])
        self.b2.trim(2 * c - self.size[0] - self.size[1] - len(self.b1))


class S3Fifo(Segments[K]):
    """``s3fifo[:S]``: S3-FIFO (Yang et al., SOSP'23) on leaves: a small FIFO S (S of the
    blocks, default 0.1) and a main FIFO M; a hit sets a 2-bit frequency. S's oldest block
    moves to M if it was hit, else goes (a leaf) and leaves a ghost; M's oldest is reinserted
    with its frequency decremented while it is above 0, else goes. A put of a ghost enters M.
    An inner block at a queue's end waits there until it is a leaf."""

    name = "s3fifo"
    leaves_only = False

    def __init__(self, small: float = 0.1) -> None:
        super().__init__()
        self.small = small
        self.ghosts: Ghosts[K] = Ghosts()
        self.freq: dict[int, int] = {}
        self._waiting: set[int] = set()  # ids of inner nodes parked at a queue's end

    def inserted(self, node: Node[K]) -> None:
        seg = 1 if self.ghosts.take(node.block) else 0
        self.freq[id(node)] = 0
        self.place(node, seg, float(self.c.clock))

    def touched(self, node: Node[K]) -> None:
        self.freq[id(node)] = min(3, self.freq.get(id(node), 0) + 1)

    def covered(self, node: Node[K]) -> None:
        return None

    def exposed(self, node: Node[K]) -> None:
        if id(node) in self._waiting:
            self._waiting.discard(id(node))
            self.reindex(node)

    def _from(self, seg: int, budget: int) -> Node[K] | None:
        while budget > 0:
            budget -= 1
            node = self.head(seg)
            if node is None:
                return None
            self.take(seg)
            f = self.freq.get(id(node), 0)
            if seg == 0 and f > 0:
                self.freq[id(node)] = 0
                self.place(node, 1, float(self.c.clock))
            elif seg == 1 and f > 0:
                self.freq[id(node)] = f - 1
                self.place(node, 1, float(self.c.clock))
            elif node.children:
                self._waiting.add(id(node))
            else:
                return node
        return None

    def pop(self) -> Node[K] | None:
        budget = 4 * len(self.c.nodes) + 16
        for _ in range(4):
            first = 0 if self.size[0] >= self.small * self.blocks() else 1
            for seg in (first, 1 - first):
                node = self._from(seg, budget)
                if node is not None:
                    return node
        return None

    def evicted(self, node: Node[K]) -> None:
        super().evicted(node)
        self.freq.pop(id(node), None)
        if node.seg == 0:
            self.ghosts.add(node.block)
            self.ghosts.trim(self.blocks())


class TieredGhost(Tiered[K]):
    """``tiered-ghost``: ``tiered`` whose protections learn from ghosts (the ARC idea on its
    three tiers): each evicted block leaves its tier in a ghost list as long as the store; a
    put of a ghost is a miss a better choice would have avoided. Every 2 % of a turnover the
    protections move by ETA * log(tier's ghost-hit rate / overall rate) (rates decayed over
    four turnovers, shrunk toward the mean by 50 pseudo-evictions), within [0, 3] turnovers
    and the lowest at 0: a tier whose blocks come back more than the others' gets more room.
    Starts from ``tiered``'s 0 / 1 / 1.5."""

    name = "tiered-ghost"

    def __init__(self, eta: float = 0.02) -> None:
        super().__init__()
        self.eta = eta
        self.learned = list(self.offsets)
        self.ghosts: OrderedDict[K, int] = OrderedDict()
        self._ev = [0.0, 0.0, 0.0]
        self._gh = [0.0, 0.0, 0.0]
        self._new_ev = [0, 0, 0]
        self._new_gh = [0, 0, 0]
        self._since = 0

    def inserted(self, node: Node[K]) -> None:
        tier = self.ghosts.pop(node.block, None)
        if tier is not None:
            self._new_gh[tier] += 1
        super().inserted(node)

    def evicted(self, node: Node[K]) -> None:
        n = max(1, len(self.c.nodes))
        self._new_ev[node.seg] += 1
        self.ghosts[node.block] = node.seg
        while len(self.ghosts) > n:
            self.ghosts.popitem(last=False)
        self._since += 1
        if self._since >= max(1, n // 50):
            self._since = 0
            self._learn(min(1.0, max(1, n // 50) / (4.0 * n)))

    @property
    def c(self) -> LeafCache[K]:
        assert self.cache is not None, "bind() first"
        return self.cache

    def _learn(self, decay: float) -> None:
        for t in range(3):
            self._ev[t] = self._ev[t] * (1 - decay) + self._new_ev[t]
            self._gh[t] = self._gh[t] * (1 - decay) + self._new_gh[t]
            self._new_ev[t] = self._new_gh[t] = 0
        total_ev, total_gh = sum(self._ev), sum(self._gh)
        if total_ev < 1 or total_gh <= 0:
            return
        mean = total_gh / total_ev
        for t in range(3):
            rate = (self._gh[t] + 50 * mean) / (self._ev[t] + 50)
            self.learned[t] = min(3.0, max(0.0, self.learned[t] + self.eta * math.log(rate / mean)))
        low = min(self.learned)
        self.learned = [o - low for o in self.learned]
        self.offsets = (self.learned[0], self.learned[1], self.learned[2])


def _kin(cls: Callable[..., Any]) -> Callable[[str], Any]:
    return lambda arg: cls(float(arg)) if arg else cls()


REGISTRY: dict[str, Callable[[str], Any]] = {
    "2q": _kin(TwoQ),
    "arc": lambda arg: Arc(),
    "s3fifo": _kin(S3Fifo),
    "tiered-ghost": _kin(TieredGhost),
}
