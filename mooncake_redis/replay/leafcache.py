"""The reference model of our store's radix eviction: whole blocks, leaves only, one policy.

It follows the store's calling pattern, not an idealised cache, so that a policy ranked here
ranks the same on the store. A put batch reserves room for every put in order and refuses the
rest once the capacity is reached (a block accepted only in part is rolled back, and so are its
children in the batch; refused puts free their room at the end of the batch); a block whose
parent block is not stored is refused (the put guard). After the batch, one eviction pass runs
when the used ratio is above the high watermark (down to it, also after a refusal) or, at or
below it, a put found no room (down to the watermark minus the eviction ratio, freeing at least
that ratio). A pass takes the policy's best leaf one at a time; a parent whose last child went
becomes a leaf at once, as in the store's exact order along chains. A leaf with a live lease
(granted by a hit, ``lease_ttl_ms`` after it) is skipped, as the store skips it.

Clocks: ``clock`` counts the calls (exists, put, get); ``c.evicted_blocks`` is the logical
clock a store's single evictor can keep without a shared counter (in steady state one block
is evicted per block put); the ``now_ms`` the driver sets is the replay's wall clock at its
pacing (leases, ``lru-freq``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True, eq=False)
class Node(Generic[K]):
    """One stored block and the per-node state a policy may read (all kept by the cache)."""

    block: K
    parent: Node[K] | None
    depth: int
    objects: int
    born: int
    """clock when it was put"""
    last: int
    """clock of its last touch (its put before the first hit)"""
    s_ms: float
    """the store's leaf score: creation ms, then the newest lease timeout (lease order)"""
    stamp: int
    """logical time of its last touch (or put): blocks evicted so far (see ``LeafCache``)"""
    born_ms: float
    """the replay's clock when it was put"""
    prev: int = -1
    """clock of the touch before ``last`` (-1: none)"""
    refs: int = 0
    """calls that found it (exists and get hits)"""
    grants: int = 0
    """leases granted on its keys (the store's hit counter ``h``: one per key and call)"""
    children: int = 0
    fan: int = 0
    """children it ever had (a shared prefix has many)"""
    linked: bool = False
    """a put of a child was tried under it (the store links a child before it knows whether
    the put gets room: ``tiered``'s exposed tier)"""
    key: float = 0.0
    """the policy's priority while it is a leaf: lower goes first"""
    seg: int = 0
    """the policy's segment"""
    ver: int = 0
    """bumped whenever the node is re-indexed, so that stale index entries are skipped"""
    alive: bool = True


class LeafPolicy(Protocol[K]):
    """Which leaf goes next. The cache tells it every event and asks for victims in turn."""

    name: str

    def bind(self, cache: LeafCache[K]) -> None: ...

    def inserted(self, node: Node[K]) -> None:
        """A block was put: it is a leaf now (its parent, if any, no longer is)."""

    def touched(self, node: Node[K]) -> None:
        """A call found the block (``node.refs`` already counts it)."""

    def exposed(self, node: Node[K]) -> None:
        """The node's last child was evicted: it is a leaf again."""

    def covered(self, node: Node[K]) -> None:
        """The leaf got its first child: it is no longer a leaf."""

    def evicted(self, node: Node[K]) -> None:
        """The node was evicted (it was the last ``pop``)."""

    def pop(self) -> Node[K] | None:
        """The next victim among the leaves, taken out of the index; None if there is none."""

    def requeue(self, node: Node[K]) -> None:
        """A popped leaf could not go (leased): put it back as it was."""


@dataclass
class CacheCounters:
    evictions: int = 0
    """passes that evicted something"""
    evicted_blocks: int = 0
    evicted_objects: int = 0
    refused_no_room: int = 0
    refused_orphan: int = 0


class LeafCache(Generic[K]):
    """A prefix-closed store of whole blocks with the store's put and eviction pattern."""

    def __init__(
        self,
        capacity: int,
        policy: LeafPolicy[K],
        *,
        high_watermark: float = 0.9,
        eviction_ratio: float = 0.05,
        lease_ttl_ms: float = 0.0,
    ) -> None:
        self.capacity = capacity
        """in objects"""
        self.high_watermark = high_watermark
        self.eviction_ratio = eviction_ratio
        self.lease_ttl_ms = lease_ttl_ms
        self.policy = policy
        self.nodes: dict[K, Node[K]] = {}
        self.used = 0
        self.clock = 0
        self.now_ms = 0.0
        self.puts = 0
        """blocks put so far"""
        self.turnover = 0
        """blocks stored after the last pass (the store's evictor publishes it: ``tiered``)"""
        self.published_clock = 0
        """the logical clock (blocks evicted) as of the last pass: what the store's evictor
        publishes with the turnover (``tiered``'s put grace compares stamps with it)"""
        self.c = CacheCounters()
        self._evicted: list[K] = []
        policy.bind(self)

    def __contains__(self, block: object) -> bool:
        return block in self.nodes

    def tick(self) -> int:
        """One call: every block it touches shares this logical time."""
        self.clock += 1
        return self.clock

    # -- reads --------------------------------------------------------------------------------
    def touch(self, block: K, keys: int = 1) -> bool:
        """A lease-granting hit on ``keys`` keys of a stored block in the current call."""
        node = self.nodes.get(block)
        if node is None:
            return False
        if node.last != self.clock:
            node.prev, node.last = node.last, self.clock
            node.refs += 1
        node.stamp = self.c.evicted_blocks
        node.grants += keys
        node.s_ms = max(node.s_ms, self.now_ms + self.lease_ttl_ms)
        self.policy.touched(node)
        return True

    # -- puts ---------------------------------------------------------------------------------
    def put(self, blocks: Sequence[tuple[K, K | None, int]]) -> list[bool]:
        """One put batch of (block, parent block or None for a root, objects); whether each
        block was stored. Runs the eviction pass the store would run after it."""
        out: list[bool] = []
        full = False
        reserved = self.used
        for block, parent, objects in blocks:
            if block in self.nodes:  # never overwritten
                out.append(False)
                continue
            pnode = self.nodes.get(parent) if parent is not None else None
            if pnode is not None and not pnode.linked:
                pnode.linked = True  # the store links every put it tries, room or not
                hook = getattr(self.policy, "linked", None)
                if hook is not None:
                    hook(pnode)
            if full or reserved + objects > self.capacity:
                full = True  # reservations go in order: everything after the first miss fails
                self.c.refused_no_room += 1
                out.append(False)
                continue
            reserved += objects  # every put reserves first, a refused one frees at the end
            if parent is not None and pnode is None:
                self.c.refused_orphan += 1  # the put guard (also a parent refused above)
                out.append(False)
                continue
            self._add(block, pnode, objects)
            out.append(True)
        self.maybe_evict(no_room=full)
        return out

    def _add(self, block: K, parent: Node[K] | None, objects: int) -> None:
        depth = parent.depth + 1 if parent is not None else 0
        node = Node(
            block,
            parent,
            depth,
            objects,
            self.clock,
            self.clock,
            self.now_ms,
            self.c.evicted_blocks,
            self.now_ms,
        )
        self.nodes[block] = node
        self.used += objects
        self.puts += 1
        if parent is not None:
            parent.children += 1
            parent.fan += 1
            if parent.children == 1:
                self.policy.covered(parent)
        self.policy.inserted(node)

    # -- eviction -----------------------------------------------------------------------------
    def maybe_evict(self, no_room: bool = False) -> int:
        """The pass after a put batch; returns the objects evicted."""
        hw = int(self.high_watermark * self.capacity)
        if self.used > hw:  # the store's pass reason is "watermark" first, even after a refusal
            target, min_free = hw, 0
        elif no_room:
            target = int(max(0.0, self.high_watermark - self.eviction_ratio) * self.capacity)
            min_free = int(self.eviction_ratio * self.capacity)
        else:
            return 0
        freed = 0
        skipped: list[Node[K]] = []
        while self.used > target or freed < min_free:
            node = self.policy.pop()
            if node is None:
                break
            if self.lease_ttl_ms > 0 and node.s_ms > self.now_ms:
                skipped.append(node)  # leased: the store skips it, and reads on
                continue
            freed += self._evict(node)
        for node in skipped:
            self.policy.requeue(node)
        if freed:
            self.c.evictions += 1
        self.turnover = len(self.nodes)
        self.published_clock = self.c.evicted_blocks
        return freed

    def drain_evicted(self) -> list[K]:
        """The blocks evicted since the last call."""
        out, self._evicted = self._evicted, []
        return out

    def _evict(self, node: Node[K]) -> int:
        del self.nodes[node.block]
        self._evicted.append(node.block)
        node.alive = False
        self.used -= node.objects
        self.c.evicted_blocks += 1
        self.c.evicted_objects += node.objects
        self.policy.evicted(node)
        parent = node.parent
        if parent is not None:
            parent.children -= 1
            if parent.children == 0:
                self.policy.exposed(parent)
        return node.objects
