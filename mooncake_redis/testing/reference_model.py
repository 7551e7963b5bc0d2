"""A pure-Python reference model of the master's semantics, with time as an explicit argument.

It mirrors what docs/architecture.md and the Mooncake semantics promise, not how the Lua does it:
objects (PROCESSING -> COMPLETE, leases, soft and hard pins, stale-put takeover), segments
(byte accounting with replicas on distinct segments), the radix tree (shell parents, first parent
wins, child-first cascades, the put guard that refuses orphans), and eviction (leaf-first with
leaf atomicity and "children alive implies parent alive", leaves ordered by the ``lru`` or
``lru-freq`` policy). Every operation takes ``now`` (ms): the model has no clock of its own, so a
test can evaluate an answer at any instant, e.g. both ends of the interval in which the real
script read Redis's ``TIME``.

Answers are plain values: ``("ok", value)`` or ``("err", code)`` with Mooncake error codes.
Allocation is modelled as byte counts per segment: exact when every object of a run has the same
size (no fragmentation), which is how the model-based test uses it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..errors import ErrorCode
from ..prefix import extract_prefix

Answer = tuple[str, Any]


def ok(value: Any = None) -> Answer:
    return ("ok", value)


def err(code: ErrorCode) -> Answer:
    return ("err", int(code))


@dataclass
class MObject:
    client: str
    put_ms: int
    size: int
    segs: list[str]
    prefix: str
    lease: int = 0
    soft_pin: int | None = None
    hard: bool = False
    complete: bool = False


@dataclass
class MNode:
    parent: str = ""
    keys: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)
    score: int = 0  # newest lease timeout granted on its keys (creation time before)
    hits: int = 0


@dataclass
class MSegment:
    size: int
    allocated: int = 0


@dataclass
class Model:
    config: Config
    segments: dict[str, MSegment] = field(default_factory=dict)
    objects: dict[str, MObject] = field(default_factory=dict)
    nodes: dict[str, MNode] = field(default_factory=dict)
    discarded: list[tuple[int, str, int]] = field(default_factory=list)  # release at, seg, bytes

    def clone(self) -> Model:
        return copy.deepcopy(self)

    def prefix_of(self, key: str) -> str:
        return extract_prefix(key, self.config.key_hash_pattern)

    # ------------------------------------------------------------------ time
    def event_times(self) -> list[int]:
        """Every instant at which some answer of the model may change (for interval checks)."""
        c = self.config
        out: set[int] = set()
        for o in self.objects.values():
            out.add(o.lease)
            if o.soft_pin is not None:
                out.add(o.soft_pin)
            if not o.complete:
                out.add(o.put_ms + c.put_start_discard_timeout_ms)
                out.add(o.put_ms + c.put_start_release_timeout_ms)
        out.update(t for t, _, _ in self.discarded)
        return sorted(out)

    # ------------------------------------------------------------------ segments
    def mount(self, seg_id: str, size: int) -> Answer:
        self.segments.setdefault(seg_id, MSegment(size))
        return ok()

    def usage(self) -> tuple[int, int]:
        return (
            sum(s.allocated for s in self.segments.values()),
            sum(s.size for s in self.segments.values()),
        )

    # ------------------------------------------------------------------ radix
    def _node(self, h: str, now: int) -> MNode:
        if h not in self.nodes:
            self.nodes[h] = MNode(score=now)
        return self.nodes[h]

    def _link(self, parent: str, child: str, now: int) -> None:
        self._node(parent, now).children.add(child)

    def _attach(self, h: str, parent: str, keys: list[str], now: int) -> None:
        node = self._node(h, now)
        if parent:
            node.parent = parent
        node.keys.update(keys)

    def _collapse(self, h: str) -> None:
        """Deletes empty nodes upward (child-first unlink, the cascade)."""
        seen: set[str] = set()
        while h in self.nodes and h not in seen:
            seen.add(h)
            node = self.nodes[h]
            if node.keys or node.children:
                return
            del self.nodes[h]
            p = node.parent
            if not p or p not in self.nodes:
                return
            self.nodes[p].children.discard(h)
            h = p

    def _unregister_key(self, key: str) -> int:
        h = self.prefix_of(key)
        node = self.nodes.get(h)
        if node is None or key not in node.keys:
            return 0
        node.keys.discard(key)
        self._collapse(h)
        return 1

    def block_stored(self, h: str) -> bool:
        node = self.nodes.get(h)
        if node is None or not node.keys:
            return False
        return all(k in self.objects and self.objects[k].complete for k in node.keys)

    def register(self, h: str, parent: str, keys: list[str], now: int) -> Answer:
        """RegisterRadixTreeNode (Path B) with valid input."""
        node = self.nodes.get(h)
        if node is not None and node.parent and parent and node.parent != parent:
            if parent in self.nodes and not self.nodes[parent].keys:
                pass  # the refused call's shell is undone by the caller: nothing to model
            return err(ErrorCode.INVALID_PARAMS)
        if parent:
            self._link(parent, h, now)
        self._attach(h, parent, keys, now)
        return ok()

    def unregister(self, keys: list[str]) -> Answer:
        return ok(sum(self._unregister_key(k) for k in dict.fromkeys(keys)))

    def get_node(self, h: str) -> Answer:
        node = self.nodes.get(h)
        if node is None:
            return err(ErrorCode.OBJECT_NOT_FOUND)
        return ok((node.parent, sorted(node.keys), sorted(node.children)))

    # ------------------------------------------------------------------ objects
    def _stale(self, o: MObject, now: int) -> bool:
        return not o.complete and o.put_ms + self.config.put_start_discard_timeout_ms <= now

    def _free(self, o: MObject, release_at: int | None = None) -> None:
        for s in o.segs:
            if release_at is not None:
                self.discarded.append((release_at, s, o.size))
            elif s in self.segments:
                self.segments[s].allocated -= o.size

    def _erase(self, key: str, release_at: int | None = None) -> None:
        o = self.objects.pop(key)
        self._free(o, release_at)
        self._unregister_key(key)

    def put_start(
        self,
        client: str,
        key: str,
        size: int,
        now: int,
        *,
        replica_num: int = 1,
        parent: str = "",
        soft_pin: bool = False,
        hard_pin: bool = False,
        placement: list[str] | None = None,
    ) -> Answer:
        """PutStart of one key (valid input). The value of an accepted put: the segments of its
        replicas. The real allocator picks segments at random: pass its choice as
        ``placement`` and the model checks that it is legal (distinct segments with room, as
        many as replica_num allows) instead of choosing itself."""
        c = self.config
        prefix = self.prefix_of(key)
        old = self.objects.get(key)
        if old is not None and not self._stale(old, now):
            return err(ErrorCode.OBJECT_ALREADY_EXISTS)
        radix = c.enable_radix_tree and bool(parent)
        if radix and c.radix_put_guard and not self.block_stored(parent):
            return err(ErrorCode.OBJECT_NOT_FOUND)
        free = [s for s, seg in sorted(self.segments.items()) if seg.size - seg.allocated >= size]
        if not free:
            return err(ErrorCode.NO_AVAILABLE_HANDLE)
        node = self.nodes.get(prefix)
        if radix and node is not None and node.parent and node.parent != parent:
            return err(ErrorCode.INVALID_PARAMS)
        if old is not None:
            self._erase(key, old.put_ms + c.put_start_release_timeout_ms)
        segs = free[:replica_num]
        if placement is not None:
            if len(set(placement)) != len(placement) or not set(placement) <= set(free):
                return ("illegal placement", sorted(placement))
            if len(placement) != min(replica_num, len(free)):
                return ("illegal replica count", sorted(placement))
            segs = list(placement)
        for s in segs:
            self.segments[s].allocated += size
        self.objects[key] = MObject(
            client,
            now,
            size,
            segs,
            prefix,
            soft_pin=now + c.default_kv_soft_pin_ttl_ms if soft_pin else None,
            hard=hard_pin,
        )
        if c.enable_radix_tree:
            if radix:
                self._link(parent, prefix, now)
            self._attach(prefix, parent if radix else "", [key], now)
        return ok(sorted(segs))

    def put_end(self, client: str, key: str, now: int) -> Answer:
        o = self.objects.get(key)
        if o is None:
            return err(ErrorCode.OBJECT_NOT_FOUND)
        if o.client != client:
            return err(ErrorCode.ILLEGAL_CLIENT)
        o.complete = True
        o.lease = max(o.lease, now)
        return ok()

    def put_revoke(self, client: str, key: str, now: int) -> Answer:
        o = self.objects.get(key)
        if o is None:
            return err(ErrorCode.OBJECT_NOT_FOUND)
        if o.client != client:
            return err(ErrorCode.ILLEGAL_CLIENT)
        if o.complete:
            return err(ErrorCode.INVALID_WRITE)
        self._erase(key)
        return ok()

    def _grant(self, key: str, now: int) -> None:
        c = self.config
        o = self.objects[key]
        o.lease = max(o.lease, now + c.default_kv_lease_ttl_ms)
        if o.soft_pin is not None:
            o.soft_pin = max(o.soft_pin, now + c.default_kv_soft_pin_ttl_ms)
        node = self.nodes.get(o.prefix)
        if c.enable_radix_tree and node is not None and key in node.keys:
            node.score = max(node.score, o.lease)
            node.hits += 1

    def get_replica_list(self, key: str, now: int) -> Answer:
        """The value: the number of COMPLETE replicas."""
        o = self.objects.get(key)
        if o is None:
            return err(ErrorCode.OBJECT_NOT_FOUND)
        if not o.complete:
            return err(ErrorCode.REPLICA_IS_NOT_READY)
        self._grant(key, now)
        return ok(len(o.segs))

    def exist(self, key: str, now: int) -> Answer:
        o = self.objects.get(key)
        if o is None or not o.complete:
            return ok(False)
        self._grant(key, now)
        return ok(True)

    def remove(self, key: str, now: int, force: bool = False) -> Answer:
        o = self.objects.get(key)
        if o is None:
            return err(ErrorCode.OBJECT_NOT_FOUND)
        if not force and o.lease > now:
            return err(ErrorCode.OBJECT_HAS_LEASE)
        if not o.complete:
            return err(ErrorCode.REPLICA_IS_NOT_READY)
        self._erase(key)
        return ok()

    # ------------------------------------------------------------------ janitor
    def janitor(self, now: int) -> Answer:
        """Stale puts discarded (buffers held until put start + release timeout), due
        discarded buffers released. The value: (discarded puts, released buffers)."""
        c = self.config
        stale = [k for k, o in self.objects.items() if self._stale(o, now)]
        for k in stale:
            self._erase(k, self.objects[k].put_ms + c.put_start_release_timeout_ms)
        due = [d for d in self.discarded if d[0] <= now]
        self.discarded = [d for d in self.discarded if d[0] > now]
        for _, s, size in due:
            if s in self.segments:
                self.segments[s].allocated -= size
        return ok((len(stale), len(due)))

    # ------------------------------------------------------------------ eviction
    def evictable(self, key: str, now: int) -> bool:
        o = self.objects.get(key)
        return o is not None and o.complete and not o.hard and o.lease <= now

    def leaf_status(self, h: str, now: int) -> str:
        """'ok' when the node is a leaf whose stored keys may all be evicted now."""
        node = self.nodes.get(h)
        if node is None or not node.keys:
            return "gone"
        if node.children:
            return "inner"
        stored = [k for k in node.keys if k in self.objects]
        if not stored:
            return "unstored"  # registered keys only: nothing to free
        if not all(self.evictable(k, now) for k in stored):
            return "blocked"
        return "ok"

    def policy_score(self, h: str) -> float:
        node = self.nodes[h]
        return self.score(node.score, node.hits)

    def score(self, s: float, hits: int) -> float:
        """The leaf policy: ``lru`` = the newest lease timeout on the leaf's keys; ``lru-freq[:W]``
        adds W * log2(1 + min(hits, 1024)) (W defaults to the lease ttl)."""
        spec = self.config.eviction_policy
        if spec.startswith("lru-freq"):
            _, _, arg = spec.partition(":")
            weight = float(arg) if arg else float(self.config.default_kv_lease_ttl_ms)
            return s + weight * math.log2(1 + min(max(hits, 0), 1024))
        return float(s)

    def soft_pinned(self, h: str, now: int) -> bool:
        node = self.nodes.get(h)
        return node is not None and any(
            (o := self.objects.get(k)) is not None and o.soft_pin is not None and o.soft_pin > now
            for k in node.keys
        )

    def eviction_order(self, now: int) -> list[str]:
        """The evictable leaves now, best victim first (ties by hash)."""
        leaves = [h for h in self.nodes if self.leaf_status(h, now) == "ok"]
        return sorted(leaves, key=lambda h: (self.policy_score(h), h))

    def apply_eviction(self, evicted: set[str], dropped: set[str], now: int) -> list[str]:
        """Checks that an eviction pass of the real evictor was legal at ``now`` and applies it.

        ``evicted``: the object keys it erased; ``dropped``: the nodes that lost all their keys
        (evicted leaves, including leaves of registered-but-unstored keys). Returns the
        violations (empty = legal): only evictable objects; whole leaves (every key of an
        evicted node goes, no object outside an evicted node); leaf-first (each node was a
        leaf when its turn came: children alive implies parent alive)."""
        problems: list[str] = []
        for k in sorted(evicted):
            if k not in self.objects:
                problems.append(f"{k}: evicted but not stored")
            elif not self.evictable(k, now):
                o = self.objects[k]
                problems.append(
                    f"{k}: not evictable (complete={o.complete} hard={o.hard} "
                    f"lease={o.lease} now={now})"
                )
        in_nodes: set[str] = set()
        for h in dropped:
            node = self.nodes.get(h)
            stored = {k for k in (node.keys if node else set()) if k in self.objects}
            in_nodes |= stored
            if not stored <= evicted:
                problems.append(f"node {h}: leaf atomicity, kept {sorted(stored - evicted)}")
        if self.config.enable_radix_tree and not evicted <= in_nodes:
            problems.append(f"objects evicted outside evicted leaves: {sorted(evicted - in_nodes)}")
        todo = set(dropped)
        while todo:
            ready = [h for h in todo if not self.nodes.get(h, MNode()).children]
            if not ready:
                problems.append(f"nodes {sorted(todo)}: evicted while a child was alive")
                break
            for h in sorted(ready):
                todo.discard(h)
                node = self.nodes.get(h)
                for k in sorted(node.keys if node else ()):
                    if k in self.objects:
                        self._erase(k)
                    else:
                        self._unregister_key(k)  # registered, not stored: goes with its leaf
        for k in evicted:  # objects outside the tree (radix off)
            if k in self.objects:
                self._erase(k)
        return problems

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Comparable state: objects, radix nodes, allocated bytes per segment."""
        return {
            "objects": {
                k: (o.complete, len(o.segs), o.hard, o.soft_pin is not None)
                for k, o in sorted(self.objects.items())
            },
            "nodes": {
                h: (n.parent, sorted(n.keys), sorted(n.children))
                for h, n in sorted(self.nodes.items())
            },
            "allocated": {s: seg.allocated for s, seg in sorted(self.segments.items())},
        }
