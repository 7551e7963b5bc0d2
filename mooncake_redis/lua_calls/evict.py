"""Wrappers of the eviction scripts on the shard tags.

Writing steps are fenced: they take the lease's (epoch, expiry) and answer ``fenced`` instead
of writing when a newer epoch reached the shard or the lease is over by Redis time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..context import Context, ShardItem
from ..models import SegmentStats
from ..records import FreePair, _s, node_parent_hash
from .radix import RawContinuation
from .segment import Pending, segment_stats

Journal = list[tuple[int, str]]  # (shard, journaled unlink step as cjson)


class Fence(NamedTuple):
    epoch: int
    expires_ms: int


class LeafRow(NamedTuple):
    """An evictable leaf as the candidate reads return it."""

    h: str
    score: float
    hits: int
    nbytes: int
    objects: int
    soft: bool
    parent: str
    parent_shard: int
    zscore: float = 0.0
    """its score in the leaves index (or the one it will get there: a parent read ahead)"""
    stamp: int = 0
    """the logical clock the node was stamped with at its put or last hit (tiered)"""
    clock: int = 0
    """its shard's logical clock as the evictor last published it (tiered)"""
    exposed: bool = False
    """it once had a child (the tiered policy's middle tier)"""


def _leaf(row: Sequence[Any]) -> LeafRow:
    # float() and int() take the reply's bytes (or str) as they are: only the two names are
    # decoded (a pass reads about a hundred rows).
    h, s, hits, nbytes, objs, soft, parent, pshard, z, stamp, clock, exposed = row
    return LeafRow(
        _s(h),
        float(s),
        int(float(hits)),
        int(nbytes),
        int(objs),
        bool(int(soft)),
        node_parent_hash(parent),
        int(pshard),
        float(z),
        int(float(stamp)),
        int(clock),
        bool(int(exposed)),
    )


class Window(NamedTuple):
    """One shard's next window of its leaf or object index, and where its cursor is now."""

    shard: int
    rows: list[Any]  # LeafRow (evict_candidates) or ObjectRow (evict_objects_scan)
    score: str
    member: str
    exhausted: bool
    skipped: dict[str, int]
    peek: tuple[str, str] | None = None
    """evict_candidates with ``want``: a shard not walked, its first unread entry (score,
    member): none of its unread leaves sorts before it"""


class ObjectRow(NamedTuple):
    key: str
    lease_ms: int
    soft: bool
    nbytes: int


class EvictedLeaf(NamedTuple):
    status: str  # 'ok' or why not
    erased: list[str]
    registered_keys: int
    nbytes: int
    parent: str
    parent_shard: int


class FencedCall(NamedTuple):
    """One node's reply of a fenced writing step."""

    fenced: bool
    rows: list[tuple[int, Any]]  # (item index, EvictedLeaf / (status, bytes))
    continuations: list[RawContinuation]
    frees: list[FreePair]
    journal: Journal
    segments: list[SegmentStats | None] | None = None
    """evict_leaves on a single Redis: the segments asked for, read after the call's frees
    (None: not read)"""
    published: bool = False
    """evict_leaves: the pass's goal was met after the call, which published the clocks"""


class ClockAsk(NamedTuple):
    """evict_leaves on a single Redis, from a caller whose leaves cover every shard: publish
    the tiered policy's clocks (as evict_publish) if the pass's goal is met after the call."""

    leaves: int  # leaves the pass evicted before the call and did not publish yet
    ratio: float  # the goal's used ratio
    bytes: int  # bytes still to free before the call (may be <= 0)
    objects: int | None  # objects still to evict before the call (None: the goal is in bytes)


async def evict_fence(ctx: Context, epoch: int) -> None:
    """``evict_fence``: every shard's fence up to ``epoch``."""
    await ctx.run_every_shard("evict_fence", [epoch])


async def evict_publish(ctx: Context, fence: Fence, turnover: int | None, evicted: int) -> bool:
    """``evict_publish``: the tiered policy's turnover and logical clock after a pass; False
    when fenced. ``turnover`` None: the script sums the nodes counters itself, which only a
    caller whose shards all go in one call may ask (standalone, shards <= script_batch_size)."""
    head = [*fence, "" if turnover is None else turnover, evicted]
    replies = await ctx.run_every_shard("evict_publish", head)
    return all(int(r) == 1 for _, r in replies)


async def radix_policy(ctx: Context, offsets: str) -> int:
    """``radix_policy``: records the tier protections ('' = not tiered) in every shard,
    rescoring the leaves of a shard whose scoring changed; returns the leaves rescored."""
    return sum(int(r) for _, r in await ctx.run_every_shard("radix_policy", [offsets]))


async def evict_unlinks_peek(ctx: Context) -> Journal:
    """``evict_unlinks_peek``: journaled unlink steps an evictor left undone."""
    journal: Journal = []
    for idx, reply in await ctx.run_every_shard(
        "evict_unlinks_peek", [ctx.config.script_batch_size]
    ):
        for shard, entries in zip(idx, reply):
            journal.extend((shard, _s(e)) for e in entries)
    return journal


async def evict_unlinks_ack(ctx: Context, journal: Journal) -> None:
    """``evict_unlinks_ack``: drops journaled unlink steps once they ran."""
    if journal:
        await ctx.run_sharded("evict_unlinks_ack", [(sh, [e]) for sh, e in journal])


async def evict_counts(ctx: Context) -> dict[int, int]:
    """``evict_counts``: objects per shard."""
    out: dict[int, int] = {}
    for idx, (_now, groups) in await ctx.run_every_shard("evict_counts"):
        for shard, (objects, _expired) in zip(idx, groups):
            out[shard] = int(objects)
    return out


async def evict_pending(ctx: Context) -> Pending:
    """``evict_pending``: the unlink journal, outbox and orphan index sizes over every shard
    (on a single Redis, one ``EXISTS`` of all their keys when none holds anything)."""
    unlinks = outbox = orphans = 0
    one = "0" if ctx.backend.cluster else "1"
    for _idx, reply in await ctx.run_every_shard("evict_pending", [one]):
        for u, o, r in reply:
            unlinks, outbox, orphans = unlinks + int(u), outbox + int(o), orphans + int(r)
    return Pending(unlinks, outbox, orphans)


async def evict_orphans(ctx: Context, per_shard: int) -> list[tuple[int, int, str]]:
    """``evict_orphans``: (marked ms, shard, root) of each shard's oldest orphan roots."""
    out = []
    for idx, reply in await ctx.run_every_shard("evict_orphans", [per_shard]):
        for shard, flat in zip(idx, reply):
            for h, ms in zip(flat[::2], flat[1::2]):
                out.append((int(float(_s(ms))), shard, _s(h)))
    return out


class AncestorRow(NamedTuple):
    status: str
    children: int
    shard: int
    leaf: LeafRow | None  # when status is 'ok'


class ReadAhead(NamedTuple):
    """What evict_candidates needs to read ahead a pass's first ancestors read (the tiered
    policy's put grace, and the evictor's constants): see lua/evict_candidates.lua."""

    grace: float
    need_bytes: int
    need_objects: int
    round_limit: int
    chain: int
    parents: int
    side: int


AncestorRead = tuple[list[tuple[str, int, int]], list[list[AncestorRow]]]
"""(the nodes' (hash, shard, depth) in the order asked, each one's chain)"""


async def evict_candidates(
    ctx: Context,
    cursors: Sequence[tuple[int, str, str]],
    k: int,
    limit: int,
    want: int = 0,
    ahead: ReadAhead | None = None,
) -> tuple[int, list[Window], AncestorRead | None]:
    """``evict_candidates``: per (shard, cursor score, cursor member) the next window of
    evictable leaves; also the number of calls made. ``want`` > 0: each call walks its shards
    only for their share of its first ``want`` index entries (the others come back with a
    peek). ``ahead``: the first ancestors read read ahead, when one call covered every shard."""
    head: list[Any] = [k, limit, want, *(["", 0, 0, 0, 0, 0, 0] if ahead is None else ahead)]
    fresh = len(cursors) == ctx.keys.num_shards and all(
        sh == i and not score and not member for i, (sh, score, member) in enumerate(cursors)
    )
    if fresh:  # a pass's first read: every shard from the start of its index
        calls = await ctx.run_every_shard("evict_candidates", head, ["", ""])
    else:
        items: list[ShardItem] = [(sh, [score, member]) for sh, score, member in cursors]
        calls = await ctx.run_sharded("evict_candidates", items, head)
    out = []
    read: AncestorRead | None = None
    for idx, (_now, groups, spec) in calls:
        if spec and len(calls) == 1:
            flat, chains = spec
            nodes = [
                (_s(flat[j]), int(flat[j + 1]), int(flat[j + 2])) for j in range(0, len(flat), 3)
            ]
            read = (nodes, _chains(chains))
        for i, group in zip(idx, groups):
            rows, cs, cm, exhausted, sk_lease, sk_hard, sk_busy, ps, pm = group
            skipped = {"lease": int(sk_lease), "hard": int(sk_hard), "busy": int(sk_busy)}
            leaves = [_leaf(r) for r in rows] if rows else []
            # A pass reads every shard's group, most with no rows: decoded inline (bulk
            # strings come back as bytes; _s per value was a third of this loop's time).
            peek = None
            if ps:
                peek = (ps.decode(), pm.decode()) if type(ps) is bytes else (_s(ps), _s(pm))
            out.append(
                Window(
                    cursors[i][0],
                    leaves,
                    cs.decode() if type(cs) is bytes else _s(cs),
                    cm.decode() if type(cm) is bytes else _s(cm),
                    bool(int(exhausted)),
                    skipped,
                    peek,
                )
            )
    return len(calls), out, read


async def evict_objects_scan(
    ctx: Context,
    cursors: Sequence[tuple[int, str, str]],
    *,
    want: int,
    max_lease: str,
    limit: int,
    no_tree: bool,
) -> tuple[int, list[Window]]:
    """``evict_objects_scan`` (BatchEvict): each shard's next eligible objects by lease."""
    items: list[ShardItem] = [(sh, [sc, m, want, max_lease]) for sh, sc, m in cursors]
    calls = await ctx.run_sharded("evict_objects_scan", items, [limit, 1 if no_tree else 0])
    out = []
    for idx, (_now, groups) in calls:
        for i, (rows, cs, cm, exhausted, sk_tree, sk_busy) in zip(idx, groups):
            objs = [
                ObjectRow(
                    _s(rows[j]),
                    int(float(_s(rows[j + 1]))),
                    bool(int(rows[j + 2])),
                    int(rows[j + 3]),
                )
                for j in range(0, len(rows), 4)
            ]
            skipped = {"tree": int(sk_tree), "busy": int(sk_busy)}
            out.append(Window(items[i][0], objs, _s(cs), _s(cm), bool(int(exhausted)), skipped))
    return len(calls), out


async def evict_leaf_info(
    ctx: Context, nodes: Sequence[tuple[str, int]]
) -> list[tuple[str, LeafRow | None]]:
    """``evict_leaf_info``: (status, leaf) of nodes read by name ('ok' when evictable)."""
    replies = await ctx.run_sharded_items("evict_leaf_info", [(ps, [p]) for p, ps in nodes])
    return [(_s(st), _leaf(row) if _s(st) == "ok" else None) for st, row in replies]


async def evict_ancestors(
    ctx: Context, starts: Sequence[tuple[str, int, int]]
) -> list[list[AncestorRow]]:
    """``evict_ancestors``: per (node, shard, depth) the chain read upward from the node."""
    replies = await ctx.run_sharded_items("evict_ancestors", [(ps, [p, d]) for p, ps, d in starts])
    return _chains(replies)


def _chains(replies: Any) -> list[list[AncestorRow]]:
    # An entry is status, children, shard, then the row's fields (none unless 'ok'): one
    # table per node in the script, not two.
    out = []
    for chain in replies:
        rows = []
        for entry in chain:
            st = entry[0]
            status = st.decode() if type(st) is bytes else _s(st)
            row = _leaf(entry[3:]) if status == "ok" else None
            rows.append(AncestorRow(status, int(entry[1]), int(entry[2]), row))
        out.append(rows)
    return out


def _fenced(calls: list[tuple[list[int], Any]], leaves: bool) -> list[FencedCall]:
    out = []
    for idx, reply in calls:
        if int(reply[0]) == 0:
            out.append(FencedCall(True, [], [], [], []))
            continue
        rows: list[tuple[int, Any]] = []
        if leaves:
            _, raw, cs, fs, _now, js, _segs, published = reply
            # per leaf, flat: status, keys unregistered, bytes, parent, parent shard, m, m
            # erased keys
            j = 0
            for i in idx:
                st, nkeys, nbytes, parent, pshard, m = raw[j : j + 6]
                keys = [_s(k) for k in raw[j + 6 : j + 6 + m]]
                j += 6 + m
                row = EvictedLeaf(
                    _s(st), keys, int(nkeys), int(nbytes), node_parent_hash(parent), int(_s(pshard))
                )
                rows.append((i, row))
            journal = [(int(sh), _s(e)) for sh, e in js]
            out.append(FencedCall(False, rows, list(cs), _frees(fs), journal, None, published == 1))
            continue
        else:
            _, raw, cs, fs, _now = reply
            rows = [(i, (_s(st), int(nbytes))) for i, (st, nbytes) in zip(idx, raw)]
            journal = []
        out.append(FencedCall(False, rows, list(cs), _frees(fs), journal))
    return out


def _frees(raw: Any) -> list[FreePair]:
    return [(int(sh), _s(e)) for sh, e in raw]


async def evict_leaves(
    ctx: Context,
    fence: Fence,
    leaves: Sequence[tuple[int, str]],
    allow_soft: bool,
    segments: Sequence[str] = (),
    clocks: ClockAsk | None = None,
) -> list[FencedCall]:
    """``evict_leaves``: evicts (shard, hash) leaves, each with all its keys, tried in the
    order given (children before their parents; the shard groups do not keep it). On a single
    Redis the frees are applied in the call (no outbox entry comes back), ``segments`` are
    read after them (each call's ``FencedCall.segments``, in that order) and, with ``clocks``
    (whose caller's leaves cover every shard), the clocks are published when the goal is met."""
    here = not ctx.backend.cluster
    anchors = [ctx.keys.segment_anchor(s) for s in segments] if here else []
    ask: list[Any] = [-1, 0, 0, ""]
    if here and clocks is not None:
        objects = "" if clocks.objects is None else clocks.objects
        ask = [clocks.leaves, repr(clocks.ratio), clocks.bytes, objects]
    calls = await ctx.run_sharded(
        "evict_leaves",
        [(sh, [h, i]) for i, (sh, h) in enumerate(leaves)],
        [*fence, 1 if allow_soft else 0, 1 if here else 0, len(anchors), *anchors, *ask],
    )
    out = _fenced(calls, leaves=True)
    if anchors:
        for i, (_, reply) in enumerate(calls):
            if not out[i].fenced:
                stats = [segment_stats(s, row) for s, row in zip(segments, reply[6])]
                out[i] = out[i]._replace(segments=stats)
    return out


async def evict_keys(
    ctx: Context, fence: Fence, keys: Sequence[tuple[int, str]], *, allow_soft: bool, no_tree: bool
) -> list[FencedCall]:
    """``evict_keys`` (BatchEvict): erases (shard, key) objects; rows are (status, bytes). On a
    single Redis the frees are applied in the call (no outbox entry comes back)."""
    here = 0 if ctx.backend.cluster else 1
    calls = await ctx.run_sharded(
        "evict_keys",
        [(sh, [k]) for sh, k in keys],
        [*fence, 1 if allow_soft else 0, 1 if no_tree else 0, here],
    )
    return _fenced(calls, leaves=False)
