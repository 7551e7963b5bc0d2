"""Wrappers of the put scripts on the shard tags: the commit step and the no-buffer check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..context import Context, ShardItem
from ..keys import node_child_field, node_parent_field
from ..records import _s
from .radix import RawContinuation

_DEC = [str(i) for i in range(65)]  # replica counts (replica_num is at most 64)

# Commit.generation of a put whose parent block is an earlier item of its shard's group:
# put_start links it itself, parent first, once its checks pass (sent as 'f').
FOLD_LINK = -1
# ... whose parent block is no item of the batch (stored before it, or the put is refused):
# put_start links it itself once its checks pass, the put guard among them: a parent block
# that is not completely stored, or is an orphan, refuses the put (sent as 'g').
FOLD_STORED = -2


class Commit(NamedTuple):
    """One put's commit in its object shard (``put_start``)."""

    shard: int
    key: str
    put_id: str
    size: int
    soft_pin: bool
    hard_pin: bool
    replicas: list[dict[str, Any]]  # records with u64 values as hex strings
    prefix: str
    parent: str  # '' = none
    parent_shard: int  # -1 = none
    generation: int  # the parent link's (0 = none, FOLD_LINK / FOLD_STORED = put_start links it)
    checked: bool  # the cycle check was done


class Committed(NamedTuple):
    code: int  # 0, a Mooncake code, or CHECK_CYCLE (nothing written: check, send again)
    message: str
    replica_ids: list[int]
    adopted: bool  # failed, but the node already names the parent: keep the edge
    # FOLD_LINK / FOLD_STORED: the link put_start made (its generation, whether the parent
    # block was stored before the call); with CHECK_CYCLE too (the edge stands until the
    # resend or the undo)
    link: tuple[int, bool] | None = None


class Precheck(NamedTuple):
    """Why a put got no buffer (``put_precheck``)."""

    shard: int
    key: str
    prefix: str
    parent: str
    generation: int
    guard: bool = False  # also apply the put guard to the parent block


class Prechecked(NamedTuple):
    exists: bool  # the key exists (and its put is not stale)
    adopted: bool
    orphan: bool  # guard: the parent block is not completely stored, or is an orphan


async def put_start(
    ctx: Context, client_id: str, commits: Sequence[Commit], radix: bool
) -> tuple[list[Committed], list[RawContinuation]]:
    """``put_start``: one reply per commit (all of one client), and the continuations of edges
    it replaced."""
    c = ctx.config
    head = [
        c.num_shards,
        c.alloc_commit_deadline_ms,
        c.put_start_discard_timeout_ms,
        c.put_start_release_timeout_ms,
        c.default_kv_soft_pin_ttl_ms,
        1 if radix else 0,
        client_id,
    ]
    # The call's segment table (each distinct segment once, in the head); a replica names its
    # segment by its 1-based index there: no JSON per replica for the script to decode.
    # Flags, counts and indices go as the decimal strings Redis receives anyway (the same
    # bytes on the wire; a str packs cheaper than an int).
    seg_index: dict[tuple[str, str, str, str, str], str] = {}
    items: list[ShardItem] = []
    fields: dict[str, bytes] = {}  # hash -> its field, once per batch (a block is the prefix
    # of one item and the parent of the next)

    def field(h: str) -> bytes:
        f = fields.get(h)
        if f is None:
            f = fields[h] = node_child_field(h)
        return f

    for x in commits:
        reps = x.replicas
        argv: list[Any] = [
            x.key, x.put_id, str(x.size), "1" if x.soft_pin else "0", "1" if x.hard_pin else "0",
            _DEC[len(reps)] if len(reps) < 65 else str(len(reps)),
        ]  # fmt: skip
        for r in reps:
            desc = (r["seg"], r["base"], r["ep"], r["proto"], r["name"])
            si = seg_index.get(desc)
            if si is None:
                si = seg_index[desc] = str(len(seg_index) + 1)
            argv += (si, r["off"], r["len"], r["ms"])
        # the parent as the node stores it (field p: keys.node_parent_field) and, for a link
        # made in the commit, the prefix's edge field (the next item's parent in a chain): the
        # script packs no 64 hex digits into 32 bytes (about 8 k instructions each in Redis)
        gen: int | str = x.generation
        edge = b""
        if x.generation < 0:
            gen, edge = "f" if x.generation == FOLD_LINK else "g", field(x.prefix)
        parent = field(x.parent) if x.parent else b""
        argv += (x.prefix, parent, x.parent_shard, gen, "1" if x.checked else "0", edge)
        items.append((x.shard, argv))
    head.append(len(seg_index))
    for desc in seg_index:
        head.extend(desc)
    replies: list[Committed] = [Committed(0, "", [], False, None)] * len(items)
    conts: list[RawContinuation] = []
    new = tuple.__new__  # Committed(...) without its Python __new__ (one per item)
    for idx, (flat, cs) in await ctx.run_sharded("put_start", items, head):
        # Per item, flat: code, message, m, m replica ids, adopted, link generation and
        # stored ('' and '' without a link made here). int() reads the ids' bytes as they come
        # (decimal digits); a success's message is empty (no decode).
        j = 0
        for i in idx:
            code, msg, m = flat[j], flat[j + 1], flat[j + 2]
            k = j + 3 + m
            adopted, gen, stored = flat[k], flat[k + 1], flat[k + 2]
            replies[i] = new(
                Committed,
                (
                    code,
                    _s(msg) if msg else "",
                    [int(x) for x in flat[j + 3 : k]],
                    adopted == 1,
                    (int(gen), stored == 1) if gen else None,
                ),
            )
            j = k + 3
        conts.extend(cs)
    return replies, conts


async def put_precheck(ctx: Context, checks: Sequence[Precheck]) -> list[Prechecked]:
    """``put_precheck``: whether each key exists, and whether its node adopted the edge."""
    replies = await ctx.run_sharded_items(
        "put_precheck",
        [
            (x.shard, [x.key, x.prefix, node_parent_field(x.parent), x.generation, int(x.guard)])
            for x in checks
        ],
        [ctx.config.put_start_discard_timeout_ms],
    )
    return [
        Prechecked(bool(int(hit)), bool(int(adopted)), bool(int(orphan)))
        for hit, adopted, orphan in replies
    ]
