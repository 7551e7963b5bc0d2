"""Wrappers of the radix index scripts (shard tags, batched per node by the context)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..context import Context, ShardItem
from ..keys import node_child_field
from ..records import _s
from ..types import RadixNode

# One cross-shard unlink step (or orphan mark), as the scripts return it: {node, node shard
# (-1: compute it), child, generation or mark}.
RawContinuation = Sequence[Any]


class Link(NamedTuple):
    """A parent-side link step: the edge parent -> child."""

    parent: str
    child: str
    parent_shard: int = -1  # -1: computed from parent


class LinkReply(NamedTuple):
    generation: int
    parent_stored: bool  # the parent's block was completely stored (and not an orphan)
    parent_rooted: bool  # the parent has no parent of its own


class Register(NamedTuple):
    """A child-side register step of one node."""

    prefix_hash: str
    parent: str  # '' = unknown
    parent_shard: int  # -1 = none
    generation: int  # the link's (0 = none)
    checked: bool  # the cycle check was done
    keys: Sequence[str]


class Unlinked(NamedTuple):
    removed: int  # keys removed (radix_unregister) or edges dropped (radix_unlink)
    continuations: list[RawContinuation]


class Unlink(NamedTuple):
    parent: str
    parent_shard: int
    child: str
    generation: str  # or an orphan-mark op


def parse_node(prefix_hash: str, raw: Sequence[Any]) -> RadixNode | None:
    """``radix_get``'s entry for one hash ({} when there is no node)."""
    if not raw:
        return None
    parent, _ps, gen, created, score, hits, keys, children = raw
    flat = [_s(c) for c in children]
    gens = {flat[i]: int(float(flat[i + 1])) for i in range(0, len(flat), 2)}
    return RadixNode(
        prefix_hash=prefix_hash,
        parent_prefix_hash=_s(parent),
        keys=sorted(_s(k) for k in keys),
        children=list(gens),
        created_ms=int(_s(created)),
        score=float(_s(score)),
        hits=int(_s(hits)),
        link_generation=int(float(_s(gen))),
        child_generations=gens,
    )


async def radix_link(ctx: Context, links: Sequence[Link]) -> list[LinkReply]:
    """``radix_link``: the parent side of each link, one reply per link."""
    shard_of = ctx.keys.shard_of
    replies = await ctx.run_sharded_items(
        "radix_link",
        [
            (
                x.parent_shard if x.parent_shard >= 0 else shard_of(x.parent),
                (x.parent, x.child, node_child_field(x.child)),
            )
            for x in links
        ],
    )
    new = tuple.__new__  # LinkReply(...) without its Python __new__ (one per link)
    return [new(LinkReply, (int(g), bool(int(s)), bool(int(r)))) for g, s, r in replies]


async def radix_register(ctx: Context, items: Sequence[Register]) -> list[tuple[int, str]]:
    """``radix_register``: (code, message) per item; code CHECK_CYCLE: check, send again."""
    sent: list[ShardItem] = [
        (
            ctx.keys.shard_of(it.prefix_hash),
            [
                it.prefix_hash,
                it.parent,
                it.parent_shard,
                it.generation,
                1 if it.checked else 0,
                len(it.keys),
                *it.keys,
            ],
        )
        for it in items
    ]
    return [
        (int(code), _s(msg)) for code, msg in await ctx.run_sharded_items("radix_register", sent)
    ]


async def radix_unregister(ctx: Context, pairs: Sequence[tuple[str, str]]) -> Unlinked:
    """``radix_unregister``: removes (prefix hash, key) pairs; the continuations upward."""
    items: list[ShardItem] = [(ctx.keys.shard_of(h), [h, k]) for h, k in pairs]
    return _merge(await ctx.run_sharded("radix_unregister", items))


async def radix_unlink(ctx: Context, steps: Sequence[Unlink]) -> Unlinked:
    """``radix_unlink``: one wave of parent-side unlink steps; the next wave's continuations."""
    items: list[ShardItem] = [(u.parent_shard, [u.parent, u.child, u.generation]) for u in steps]
    return _merge(await ctx.run_sharded("radix_unlink", items))


def _merge(calls: list[tuple[list[int], Any]]) -> Unlinked:
    count, conts = 0, []
    for _, (n, cs) in calls:
        count += int(n)
        conts.extend(cs)
    return Unlinked(count, conts)


async def radix_get(ctx: Context, hashes: Sequence[str]) -> list[RadixNode | None]:
    """``radix_get``: the nodes (None where there is none), in ``hashes`` order."""
    replies = await ctx.run_sharded_items(
        "radix_get", [(ctx.keys.shard_of(h), [h]) for h in hashes]
    )
    return [parse_node(h, r) for h, r in zip(hashes, replies)]


async def radix_chain(
    ctx: Context, starts: Sequence[str], max_steps: int
) -> list[list[tuple[str, str]]]:
    """``radix_chain``: (node, parent) pairs up from each start, as far as its Redis node goes."""
    replies = await ctx.run_sharded_items(
        "radix_chain", [(ctx.keys.shard_of(h), [h, max_steps]) for h in starts]
    )
    out = []
    for flat in replies:
        items = [_s(x) for x in flat]
        out.append(list(zip(items[::2], items[1::2])))
    return out
