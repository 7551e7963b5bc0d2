"""Radix-aware cascading eviction (RFC section 3) without a depth limit.

Only leaves are evicted, each atomically with all its keys. Each shard keeps its evictable
leaves in a ZSET ordered by the leaf's newest lease (``K.leaves``, maintained by the radix
include). A pass reads every shard's index from the oldest end through a cursor, in bounded
windows (``evict_candidates``: leased, hard-pinned or still-being-written leaves are skipped and
the cursor moves past them), merges the windows in one heap by the policy's score, and chooses
victims globally until the bytes to free are covered. One fenced script call per node evicts
them (``evict_leaves``: re-checks each leaf, erases its objects, unregisters its keys); the
cross-shard unlink steps follow (``finish_unlinks``), the frees are applied to the segment
allocators, and the used ratio is read again before the next round. A parent whose last child
went is read by name (``evict_leaf_info``) and enters the heap in the same pass, so a chain of
any depth is reclaimed leaf first; the work of a pass grows with what it evicts (plus one
window per shard), never with the size of the tree.

Exact order along chains: when a leaf is chosen, its parent's state is known (read ahead up
the chain by ``evict_ancestors``; a pass's first such read is read ahead by its first
``evict_candidates`` call where one call reads every shard, and used only if it is exactly the
read asked), and a parent whose last child was chosen enters the heap at once with its own
score, so a round takes what evicting one least-recently-used leaf at a time would take, not
one leaf of every chain. ``evict_leaves`` evicts such a parent in the same call
after its children when both live on one node (on a single Redis, always).

Exact global order: a shard's unread leaves score at least its cursor's lease (policies only
add bonuses), so the best candidate in the heap is taken only when its score is not above the
cursor of any shard that still has unread leaves; otherwise those shards are read further
first (a bounded number of times per round). ``tiered`` scores the index itself (logical time,
many equal scores): its ties go by member name, the index's own order, so the comparison is on
(score, member); its young fresh leaves (the put grace) sort after every other leaf.
"""

from __future__ import annotations

import heapq
import itertools

from .. import lua_calls as lua
from ..segments import Usage
from .batch_evict import BatchEvictor, ratios
from .candidates import (
    CHAIN_READ_AHEAD,
    FIRST_READ_SLACK,
    INDEX_SHARE,
    LEAF_BYTES_GUESS,
    MAX_REFILLS_PER_ROUND,
    PARENT_READ_AHEAD,
    SIDE_CHAIN_DEPTH,
    Ancestor,
    Candidate,
    ShardCursor,
)
from .coordinator import EvictorLease, LeaseLost
from .goal import EvictionDeps, Goal
from .leaf_write import evict_leaves
from .metrics import EvictionResult
from .policy import LeafPolicy, TieredPolicy


class RadixEvictor:
    def __init__(
        self,
        deps: EvictionDeps,
        lease: EvictorLease,
        policy: LeafPolicy,
        result: EvictionResult,
        goal: Goal,
    ) -> None:
        self.deps = deps
        self.lease = lease
        self.policy = policy
        self.result = result
        self.goal = goal
        self.cursors = [ShardCursor() for _ in range(deps.ctx.keys.num_shards)]
        self.heap: list[Candidate] = []
        self.soft: list[Candidate] = []
        self.known: set[str] = set()  # leaves in the heap, set aside, or evicted this pass
        self.queued: set[str] = set()  # in the heap or set aside (soft), not yet chosen
        self.ancestors: dict[str, Ancestor] = {}  # parents read this round
        self.chosen_children: dict[str, int] = {}  # parent -> its children chosen this round
        self.depth: dict[str, int] = {}
        self.allow_soft = False
        self._seq = itertools.count()
        self._horizon: tuple[bool, float, str] | None = None  # cached; None once a cursor moved
        self._nodes: dict[int, str] = {}
        # Parents of evicted leaves not queued: read by name (probe) before the next round, if
        # the pass has one (most end after their first round).
        self.lone: dict[str, int] = {}
        # The pass's first ancestors read, read ahead by its first candidates read: used only
        # by a read that asks for exactly its nodes, before anything was evicted.
        self.ahead: lua.AncestorRead | None = None

    # -- reading ----------------------------------------------------------------------------
    def _candidate(self, row: lua.LeafRow, shard: int) -> Candidate:
        return Candidate(
            self.policy.young(row),
            self.policy.candidate_score(row),
            row.h if self.policy.ties_by_name else "",
            next(self._seq),
            row.h,
            shard,
            row.score,
            row.hits,
            row.nbytes,
            row.objects,
            row.soft,
            row.parent,
            row.parent_shard,
        )

    def _add(self, c: Candidate) -> None:
        if c.h in self.known:
            return
        self.known.add(c.h)
        self.queued.add(c.h)
        if c.soft and not self.allow_soft:
            self.soft.append(c)
        else:
            heapq.heappush(self.heap, c)

    async def refill(self, shards: list[int], want: int = 0, first: bool = False) -> None:
        """Reads the next window of each shard's leaf index (one call per node). ``want`` > 0:
        only each shard's share of the first ``want`` leaves of its node's shards (in index
        order); a shard with none is not read, only peeked at. ``first``: the pass's first
        read, which also reads ahead the first ancestors read (``_read_ahead``)."""
        shards = [sh for sh in shards if not self.cursors[sh].exhausted]
        if not shards:
            return
        k = max(self.cursors[sh].k for sh in shards)
        limit = 4 * k + 64
        cursors = [(sh, self.cursors[sh].score, self.cursors[sh].member) for sh in shards]
        ahead = self._read_ahead() if first else None
        ncalls, windows, self.ahead = await lua.evict_candidates(
            self.deps.ctx, cursors, k, limit, want, ahead
        )
        self._horizon = None
        self.result.candidate_reads += ncalls
        batch = self.deps.ctx.config.script_batch_size
        for w in windows:
            cur = self.cursors[w.shard]
            cur.score, cur.member, cur.exhausted = w.score, w.member, w.exhausted
            cur.peek = w.peek
            if w.peek is None:
                cur.k = min(batch, cur.k * 2)
            for reason, n in w.skipped.items():
                self.result.skip(reason, n)
            for row in w.rows:
                self._add(self._candidate(row, w.shard))

    async def probe(self, nodes: list[tuple[str, int]]) -> None:
        """Parents that may have become leaves: read them by name."""
        if not nodes:
            return
        replies = await lua.evict_leaf_info(self.deps.ctx, nodes)
        self.result.candidate_reads += 1
        lost = False
        for (_p, ps), (st, row) in zip(nodes, replies):
            if row is not None:
                self._add(self._candidate(row, ps))
            elif st in ("lease", "hard", "busy"):
                self.result.skip(st)
            elif st == "gone":
                lost = True
        if lost:
            # A parent was an empty shell and collapsed: the cascade went on above it to a node
            # we cannot name. Read every shard's index from the start again (bounded windows;
            # leaves already known are not added twice).
            for c in self.cursors:
                c.score, c.member, c.exhausted, c.peek = "", "", False, None
            self._horizon = None

    def _read_ahead(self) -> lua.ReadAhead | None:
        """What the first candidates read needs to read ahead the first ancestors read: the
        tiered order only (equal scores by name, so the script can sort as the heap does)."""
        if not isinstance(self.policy, TieredPolicy):
            return None
        need_bytes, need_objects = self.goal.need()
        limit = self.deps.ctx.config.script_batch_size
        return lua.ReadAhead(
            self.policy.grace,
            need_bytes,
            need_objects,
            limit,
            CHAIN_READ_AHEAD,
            PARENT_READ_AHEAD,
            SIDE_CHAIN_DEPTH,
        )

    async def read_ancestors(self, first: Candidate, wanted: int) -> None:
        """Reads the chain above ``first``'s parent (as far as the ``wanted`` leaves still to
        choose could climb), and a few nodes above the parents of the next cheapest candidates,
        in one call per node: most later choices need no read, and a pass that evicts a few
        leaves reads a few nodes."""
        depth = max(1, min(CHAIN_READ_AHEAD, wanted))
        want: dict[str, tuple[int, int]] = {first.parent: (first.pshard, depth)}
        side = min(SIDE_CHAIN_DEPTH, depth)
        for c in heapq.nsmallest(min(PARENT_READ_AHEAD, wanted), self.heap):
            if c.parent and c.parent not in self.ancestors and c.pshard >= 0:
                want.setdefault(c.parent, (c.pshard, side))
        nodes = list(want.items())
        asked = [(p, ps, d) for p, (ps, d) in nodes]
        ahead, self.ahead = self.ahead, None
        if ahead is not None and ahead[0] == asked:
            replies = ahead[1]  # read by the first candidates read, nothing written since
        else:
            replies = await lua.evict_ancestors(self.deps.ctx, asked)
            self.result.candidate_reads += 1
        for (p, _), chain in zip(nodes, replies):
            h = p
            for a in chain:
                cand = self._candidate(a.leaf, a.shard) if a.leaf is not None else None
                self.ancestors.setdefault(h, Ancestor(a.status, a.children, cand))
                if cand is None:
                    break
                h = cand.parent
        self.ancestors.setdefault(first.parent, Ancestor("gone", 0, None))

    async def expose_parent(self, c: Candidate, wanted: int) -> None:
        """``c`` was chosen: its parent becomes a candidate once all its children are.
        ``wanted``: about how many more leaves the round still has to choose."""
        p = c.parent
        if not p or c.pshard < 0:
            return
        if p not in self.ancestors:
            await self.read_ancestors(c, wanted)
        a = self.ancestors[p]
        self.depth[p] = max(self.depth.get(p, 0), self.depth.get(c.h, 1) + 1)
        n = self.chosen_children.get(p, 0) + 1
        self.chosen_children[p] = n
        if a.candidate is not None and n >= a.children:
            self._add(a.candidate)

    def _blocking_shards(self, c: Candidate | None) -> list[int]:
        """Shards whose unread leaves might go before candidate ``c`` (None: any leaf)."""
        if self._horizon is None:  # the lowest cursor of a shard with unread leaves
            self._horizon = min(
                (c.horizon for c in self.cursors if not c.exhausted),
                default=(True, float("inf"), ""),
            )
        key = (True, float("inf"), "") if c is None else (c.young, c.score, c.tie)
        if key <= self._horizon:
            return []
        return [
            sh for sh, cur in enumerate(self.cursors) if not cur.exhausted and cur.horizon < key
        ]

    # -- choosing ---------------------------------------------------------------------------
    async def pick(self) -> list[Candidate]:
        """Victims of one round, best first, covering what the goal still needs."""
        if self.lone:  # the last round's parents left leaves by it (probed only if needed)
            lone, self.lone = self.lone, {}
            await self.probe(list(lone.items()))
        picked: list[Candidate] = []
        need_bytes, need_objects = self.goal.need()
        got_bytes = got_objects = 0
        limit = self.deps.ctx.config.script_batch_size
        refills = 0
        while len(picked) < limit and (got_bytes < need_bytes or got_objects < need_objects):
            blocking = self._blocking_shards(self.heap[0] if self.heap else None)
            if blocking and refills < MAX_REFILLS_PER_ROUND:
                refills += 1
                await self.refill(blocking)
                continue
            if not self.heap:
                break
            c = heapq.heappop(self.heap)
            self.queued.discard(c.h)
            picked.append(c)
            got_bytes += c.nbytes
            got_objects += c.objects
            if len(picked) >= limit or (got_bytes >= need_bytes and got_objects >= need_objects):
                # The round's last pick: its parent could only go in a later round, which
                # reads it then if the pass goes on (a lone parent of evict's probe).
                break
            if need_objects > got_objects:
                wanted = need_objects - got_objects
            else:
                wanted = -(-(need_bytes - got_bytes) // max(1, c.nbytes))
            await self.expose_parent(c, min(limit - len(picked), max(1, wanted)))
        return picked

    # -- evicting ---------------------------------------------------------------------------
    def _node(self, shard: int) -> str:
        """The Redis node serving a shard ('' on a single Redis)."""
        if not self.deps.ctx.backend.cluster:
            return ""
        name = self._nodes.get(shard)
        if name is None:
            name = self._nodes[shard] = self.deps.ctx.backend.node_of(
                self.deps.ctx.keys.anchor(shard)
            ).name
        return name

    def _waves(self, picked: list[Candidate]) -> list[list[int]]:
        """Indexes of picked in eviction waves: a parent chosen after its children goes in their
        call when it shares their node (the script retries it after them), else one wave later,
        after the cross-node unlinks of theirs have run."""
        wave: dict[str, int] = {}
        out: list[list[int]] = []
        for i, c in enumerate(picked):  # children are always picked before their parent
            w = wave.get(c.h, 0)
            wave[c.h] = w
            if c.parent:
                step = 0 if self._node(c.pshard) == self._node(c.shard) else 1
                wave[c.parent] = max(wave.get(c.parent, 0), w + step)
            while len(out) <= w:
                out.append([])
            out[w].append(i)
        return out

    async def evict(self, picked: list[Candidate]) -> Usage | None:
        """Evicts the picked leaves in waves; the used ratio the last wave read after its
        frees (None: not read)."""
        await self.deps.ctx.checkpoint("evict:chosen")
        self.ahead = None  # read before this round's writes
        parents: dict[str, int] = {}
        evicted: list[int] = []  # indexes into picked
        usage = None
        for wave in self._waves(picked):
            usage = await self._evict_wave(picked, wave, parents, evicted)
        self.result.round_leaves.append([picked[i].h for i in sorted(evicted)])  # pick order
        # A parent can only be a leaf again once its edge is gone (same node: already; other
        # node: after finish_unlinks). Parents already queued or evicted are known.
        self.ancestors.clear()
        self.chosen_children.clear()
        done = {picked[i].h for i in evicted}
        lone = {p: ps for p, ps in parents.items() if p not in done and p not in self.queued}
        self.known.difference_update(lone)
        self.lone.update(lone)
        return usage

    async def _evict_wave(
        self,
        picked: list[Candidate],
        wave: list[int],
        parents: dict[str, int],
        evicted: list[int],
    ) -> Usage | None:
        leaves = [(picked[i].shard, picked[i].h) for i in wave]
        # A call whose leaves cover every shard (always, on one shard) can publish the clocks.
        every = len({sh for sh, _ in leaves}) == self.deps.ctx.keys.num_shards
        write = await evict_leaves(
            self.deps,
            self.lease,
            self.result,
            leaves,
            self.allow_soft,
            self.goal.segments,
            self.goal.clock_ask() if every else None,
        )
        if write.published:
            self.goal.published = self.result.evicted_leaves
        outcomes, usage = write.outcomes, write.usage
        for i, o in zip(wave, outcomes):
            if o.status != "ok":
                continue
            c = picked[i]
            d = self.depth.get(c.h, 1)
            self.result.cascade_depth = max(self.result.cascade_depth, d)
            if c.soft:
                self.result.soft_pinned_objects += len(o.keys)
            evicted.append(i)
            if o.parent:
                self.depth[o.parent] = max(self.depth.get(o.parent, 0), d + 1)
                parents[o.parent] = o.pshard
        return usage

    def _first_want(self) -> int:
        """How many leaves the first read takes, over all shards, in index order: a share of
        what the goal needs (leaves of ``LEAF_BYTES_GUESS``) and a few more, never more than the
        windows of every shard would read. 0 (every shard's window) unless the policy orders
        equal scores by name: otherwise equal scores go in read order, which the cut would
        change."""
        if not self.policy.ties_by_name:
            return 0
        need_bytes, need_objects = self.goal.need()
        leaves = need_objects or -(-need_bytes // LEAF_BYTES_GUESS)
        most = 4 * len(self.cursors)
        return max(1, min(most, leaves // INDEX_SHARE + FIRST_READ_SLACK))

    async def run(self, fallback: bool = True) -> None:
        """Rounds until the goal is met or nothing evictable is left: leaves by score, then
        (fallback) objects that belong to no tree by Mooncake's BatchEvict, then soft-pinned
        leaves as the last resort."""
        await self.refill(list(range(len(self.cursors))), self._first_want(), first=True)
        phase = "leaves"
        while not self.goal.satisfied():
            picked = await self.pick()
            if not picked:
                unread = [sh for sh, c in enumerate(self.cursors) if not c.exhausted]
                if unread:  # windows full of skipped leaves: read on (cursors only advance)
                    await self.refill(unread)
                    continue
                if phase == "leaves":
                    phase = "fallback"
                    if fallback:
                        await self._fallback()
                    continue
                if phase == "fallback" and self.deps.ctx.config.allow_evict_soft_pinned_objects:
                    phase = "soft"
                    self.allow_soft = True
                    for c in self.soft:
                        heapq.heappush(self.heap, c)  # still in self.queued
                    self.soft.clear()
                    continue
                break
            self.result.rounds += 1
            await self.goal.refresh(await self.evict(picked))

    async def _fallback(self) -> None:
        """RFC: when the leaves do not suffice, BatchEvict continues, over objects of no tree,
        run after run (as Mooncake's eviction thread would) while the goal is not met and a run
        evicts something."""
        if self.goal.max_objects is not None:
            return
        cfg = self.deps.ctx.config
        while not self.goal.satisfied():
            target, lower = ratios(
                self.goal.used, cfg.eviction_high_watermark_ratio, cfg.eviction_ratio
            )
            be = BatchEvictor(
                self.deps, self.lease, self.result, no_tree=True, scan_budget=4 * cfg.num_shards
            )
            try:
                done = await be.run(target, lower)
            finally:
                await self.goal.refresh()
            if done == 0:
                return


__all__ = ["Candidate", "LeaseLost", "RadixEvictor"]
