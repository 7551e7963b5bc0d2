"""The radix-tree index (RFC sections 2 and 7): register, query, unregister with cascade.

Parent and child may live in different shards, so every cross-shard change is a sequence of
single-shard script calls: link parent-first (edge, then child), unlink child-first (child, then
edge, then upward through empty shells). A crash between steps leaves at worst a dangling edge,
which only blocks eviction of the parent and which fsck repairs after a grace period.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .context import Context
from .cycles import CHECK_CYCLE, check_links
from .errors import ErrorCode, MooncakeError
from .lua_calls.radix import (
    Link,
    Register,
    Unlink,
    parse_node,
    radix_get,
    radix_link,
    radix_register,
    radix_unlink,
    radix_unregister,
)
from .prefix import check_key, check_str
from .records import _s
from .types import RadixNode, RegisterItem, SubtreeResult

__all__ = ["Continuation", "RadixIndex", "RadixNode", "RegisterItem", "SubtreeResult", "parse_node"]


Continuation = tuple[str, int, str, str]  # parent, parent shard, child, generation


def _cycle_msg(it: RegisterItem) -> str:
    return (
        f"parent_prefix_hash: {it.parent_prefix_hash} is below {it.prefix_hash} in the tree;"
        " the link would close a parent cycle"
    )


class RadixIndex:
    """The radix index part: everything else links and unlinks through it."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # -- validation -------------------------------------------------------------------------
    def _check_register(self, prefix_hash: Any, parent: Any, keys: Any) -> RegisterItem:
        limit = self.ctx.config.max_key_length
        h = check_str("prefix_hash", prefix_hash, limit)
        p = check_str("parent_prefix_hash", parent, limit, allow_empty=True)
        if p == h:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"parent_prefix_hash: {h} is its own parent"
            )
        if not isinstance(keys, (list, tuple)) or not keys:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, "keys: a non-empty list of strings")
        checked = []
        for i, key in enumerate(keys):
            k = check_key(key, limit, f"keys[{i}]")
            if self.ctx.prefix_of(k) != h:
                raise MooncakeError(
                    ErrorCode.INVALID_PARAMS,
                    f"keys[{i}]: key {k!r} belongs to prefix {self.ctx.prefix_of(k)!r}, not {h!r}",
                )
            checked.append(k)
        return RegisterItem(h, p, list(dict.fromkeys(checked)))

    # -- Path B: RegisterRadixTreeNode --------------------------------------------------------
    async def register_radix_tree_node(
        self, prefix_hash: str, parent_prefix_hash: str, keys: Sequence[str]
    ) -> None:
        [result] = await self.batch_register_radix_tree_node(
            [(prefix_hash, parent_prefix_hash, keys)]
        )
        if result is not None:
            raise result

    async def batch_register_radix_tree_node(
        self, items: Sequence[RegisterItem | tuple[str, str, Sequence[str]] | dict[str, Any]]
    ) -> list[MooncakeError | None]:
        """One result per item (None = registered). Link parent-first, then fill the child."""
        results: list[MooncakeError | None] = [None] * len(items)
        valid: list[tuple[int, RegisterItem]] = []
        for i, raw in enumerate(items):
            try:
                if isinstance(raw, RegisterItem):
                    item = self._check_register(raw.prefix_hash, raw.parent_prefix_hash, raw.keys)
                elif isinstance(raw, dict):
                    item = self._check_register(
                        raw.get("prefix_hash"), raw.get("parent_prefix_hash", ""), raw.get("keys")
                    )
                elif isinstance(raw, (tuple, list)) and len(raw) == 3:
                    item = self._check_register(*raw)
                else:
                    raise MooncakeError(
                        ErrorCode.INVALID_PARAMS, f"items[{i}]: not a register item"
                    )
            except MooncakeError as exc:
                results[i] = exc
                continue
            valid.append((i, item))
        if not valid:
            return results
        links = await self.link_parents(
            [(it.parent_prefix_hash, it.prefix_hash) for _, it in valid]
        )
        gens = [gen for gen, _, _ in links]
        rooted = {it.parent_prefix_hash for (_, it), (_, _, r) in zip(valid, links) if r}
        await self.ctx.checkpoint("register:linked")

        def reg_item(it: RegisterItem, gen: int, checked: int) -> Register:
            p = it.parent_prefix_hash
            pshard = self.ctx.keys.shard_of(p) if p else -1
            return Register(it.prefix_hash, p, pshard, gen, bool(checked), it.keys)

        # Items that will be roots with children when registered (a chain registered in one
        # batch) are checked before, in batch order; the rest answers CHECK_CYCLE if needed.
        pre = [
            j
            for j, (_, it) in enumerate(valid)
            if it.prefix_hash in rooted and it.parent_prefix_hash
        ]
        checked = dict.fromkeys(range(len(valid)), 0)
        refused: dict[int, bool] = {}
        if pre:
            pairs = [(valid[j][1].prefix_hash, valid[j][1].parent_prefix_hash) for j in pre]
            for j, bad in zip(pre, await check_links(self.ctx, pairs, rooted)):
                refused[j] = bool(bad)
                checked[j] = 1 if bad is False else 0  # None: a second parent, checked there
        send = [j for j in range(len(valid)) if not refused.get(j)]
        replies: list[tuple[int, str]] = [
            (int(ErrorCode.INVALID_PARAMS), _cycle_msg(valid[j][1])) if refused.get(j) else (0, "")
            for j in range(len(valid))
        ]
        sent = [reg_item(valid[j][1], gens[j], checked[j]) for j in send]
        for j, r in zip(send, await radix_register(self.ctx, sent)):
            replies[j] = r
        # A node that exists without a parent and has children gets its parent only when the
        # node is not that parent's root (cycles.py), checked in batch order so that two items
        # of one batch cannot close a cycle between them; the rest is sent again as checked.
        again = [j for j, (code, _) in enumerate(replies) if code == CHECK_CYCLE]
        if again:
            cycles = await check_links(
                self.ctx, [(valid[j][1].prefix_hash, valid[j][1].parent_prefix_hash) for j in again]
            )
            for j, bad in zip(again, cycles):
                if bad is not False:  # None: a second parent for the node, both to be checked
                    replies[j] = (int(ErrorCode.INVALID_PARAMS), _cycle_msg(valid[j][1]))
            resend = [j for j, bad in zip(again, cycles) if bad is False]
            fresh = await radix_register(
                self.ctx, [reg_item(valid[j][1], gens[j], 1) for j in resend]
            )
            for j, r in zip(resend, fresh):
                replies[j] = r
        undo: list[Continuation] = []
        for (i, it), gen, (code, msg) in zip(valid, gens, replies):
            if code != 0:
                results[i] = MooncakeError(code, msg)
                if it.parent_prefix_hash:
                    pshard = self.ctx.keys.shard_of(it.parent_prefix_hash)
                    undo.append((it.parent_prefix_hash, pshard, it.prefix_hash, str(gen)))
        if undo:  # the edge made for a refused child: drop it (generation-checked)
            await self.finish_unlinks(undo)
        return results

    async def link_parents(
        self, pairs: Sequence[tuple[str, str]], shards: Sequence[int] | None = None
    ) -> list[tuple[int, bool, bool]]:
        """Parent-side step for (parent, child) pairs: (link generation, whether the parent's
        block was completely stored at that moment, whether the parent has no parent of its own
        yet); (0, False, False) for pairs without a parent. ``shards``: the parents' shards
        when the caller has them (the put's checks), else computed here."""
        if not pairs:
            return []
        if shards is None:
            shard_of = self.ctx.keys.shard_of
            shards = [shard_of(p) if p else -1 for p, _ in pairs]
        if all(p for p, _ in pairs):  # the put's case: every pair has a parent
            new = tuple.__new__  # Link(...) without its Python __new__ (one per pair)
            links = [new(Link, (p, c, s)) for (p, c), s in zip(pairs, shards)]
            return list(await radix_link(self.ctx, links))
        out = [(0, False, False)] * len(pairs)
        todo = [(i, p, c, s) for i, ((p, c), s) in enumerate(zip(pairs, shards)) if p]
        if not todo:
            return out
        replies = await radix_link(self.ctx, [Link(p, c, s) for _, p, c, s in todo])
        for (i, _, _, _), reply in zip(todo, replies):
            out[i] = (reply.generation, reply.parent_stored, reply.parent_rooted)
        return out

    # -- unregister (child-first) with cascade -----------------------------------------------
    async def unregister_radix_tree_keys(self, keys: Iterable[str]) -> int:
        """Removes keys from the index; empty nodes go, and upward every empty shell."""
        pairs: list[tuple[str, str]] = []
        for i, key in enumerate(keys):
            k = check_key(key, self.ctx.config.max_key_length, f"keys[{i}]")
            pairs.append((self.ctx.prefix_of(k), k))
        done = await radix_unregister(self.ctx, pairs)
        await self.ctx.checkpoint("unlink:child_removed")
        await self.finish_unlinks(done.continuations)
        return done.removed

    def _continuation(self, cont: Sequence[Any]) -> Continuation:
        """{node, shard, child, generation or orphan-mark op}; shard -1: computed here (a
        script cannot hash a node to its shard)."""
        p, ps, c, g = (_s(x) for x in cont)
        shard = int(ps)
        return (p, self.ctx.keys.shard_of(p) if shard < 0 else shard, c, g)

    async def finish_unlinks(self, conts: Sequence[Sequence[Any]]) -> int:
        """Runs parent-side unlink steps (and orphan marks), wave by wave, until the cascade
        ends. Returns depth."""
        depth = 0
        pending = [self._continuation(c) for c in conts]
        while pending:
            depth += 1
            wave = await radix_unlink(self.ctx, [Unlink(*step) for step in pending])
            pending = [self._continuation(c) for c in wave.continuations]
            if pending:
                await self.ctx.checkpoint("unlink:cascade_step")
        return depth

    # -- queries ------------------------------------------------------------------------------
    async def get_nodes(self, hashes: Sequence[str]) -> list[RadixNode | None]:
        return await radix_get(self.ctx, hashes)

    async def get_keys_by_prefix(self, prefix_hash: str) -> RadixNode:
        h = check_str("prefix_hash", prefix_hash, self.ctx.config.max_key_length)
        [node] = await self.get_nodes([h])
        if node is None:
            raise MooncakeError(ErrorCode.OBJECT_NOT_FOUND, f"prefix_hash: no node {h}")
        return node

    async def get_subtree_keys(self, prefix_hash: str, max_depth: int = 16) -> SubtreeResult:
        """Every node and key under a node down to ``max_depth`` (0 = the node alone), one
        script call per tree level and node."""
        h = check_str("prefix_hash", prefix_hash, self.ctx.config.max_key_length)
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 0:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, "max_depth: a non-negative integer")
        root = await self.get_keys_by_prefix(h)
        nodes = {h: root}
        level = [root]
        depth = 0
        while level and depth < max_depth:
            nxt = [c for n in level for c in n.children if c not in nodes]
            if not nxt:
                break
            depth += 1
            level = []
            for child, node in zip(nxt, await self.get_nodes(nxt)):
                if node is not None and child not in nodes:
                    nodes[child] = node
                    level.append(node)
        truncated = any(c not in nodes for n in level for c in n.children)
        return SubtreeResult(h, nodes, depth, truncated)
