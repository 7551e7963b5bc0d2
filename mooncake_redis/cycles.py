"""The cycle check of a new parent link: a node must never get a parent below itself.

A link can close a cycle only when the child already exists without a parent and has children
(a root with a subtree, or a shell made as someone's parent): the child-side step then answers
CHECK_CYCLE instead of writing. Such a child is the root of its tree, so the link closes a
cycle exactly when the new parent's root is the child. :class:`ParentChains` finds roots from
parent pointers read up the tree (``radix_chain``: one call per Redis node a chain crosses),
remembered with path compression for the whole batch, plus the links the batch accepts as it
goes, so checking every item of a 400-level chain registered in one batch costs a few calls.
Two processes linking the two halves of a cycle at the same moment can still close one (the
check and the link are separate steps); fsck reports it and ``--repair`` breaks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .context import Context
from .lua_calls.radix import radix_chain

CHECK_CYCLE = 1  # a child-side step's "check the parent chain first" (not a Mooncake code)
CHAIN_STEP = 1000  # parent pointers one radix_chain call reads at most
MAX_CHAIN = 100_000  # a longer chain is refused, as if it closed a cycle
FAST_STEPS = 64  # steps of a root walk before it is redone with a visited set


class ParentChains:
    """Parent pointers of one batch's check: read from Redis once, then kept and compressed."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.up: dict[str, str] = {}  # node -> an ancestor ('' = root): parent or compressed
        self.given: dict[str, str] = {}  # child -> the parent this batch's check accepted

    async def _load(self, *hs: str) -> None:
        """Parent pointers up from each of ``hs``: one radix_chain call per Redis node."""
        todo = list(dict.fromkeys(h for h in hs if h not in self.up))
        if not todo:
            return
        for h, chain in zip(todo, await radix_chain(self.ctx, todo, CHAIN_STEP)):
            for node, parent in chain:
                self.up.setdefault(node, parent)
            self.up.setdefault(h, "")

    async def root(self, h: str) -> str | None:
        """The root of h's tree; None when h's chain is an old cycle or too long."""
        # The common walk (a few steps, the batch's path compression keeps it short) needs no
        # visited set: a walk of more than FAST_STEPS steps is redone by _checked_root.
        up = self.up
        path: list[str] = []
        cur = h
        while True:
            nxt = up.get(cur)
            if nxt is None:
                await self._load(cur)
                nxt = up[cur]
            if not nxt:
                break
            path.append(cur)
            cur = nxt
            if len(path) > FAST_STEPS:
                return await self._checked_root(h)
        for x in path:  # compress: every node on the path points at the root
            up[x] = cur
        return cur

    async def _checked_root(self, h: str) -> str | None:
        """:meth:`root` with a visited set: None for an old cycle or a chain over MAX_CHAIN."""
        path: list[str] = []
        seen: set[str] = set()
        cur = h
        while True:
            if cur in seen or len(path) > MAX_CHAIN:
                return None
            seen.add(cur)
            if cur not in self.up:
                await self._load(cur)
            nxt = self.up[cur]
            if not nxt:
                break
            path.append(cur)
            cur = nxt
        for x in path:  # compress: every node on the path points at the root
            self.up[x] = cur
        return cur

    async def closes_cycle(self, child: str, parent: str) -> bool | None:
        """Whether child, a root with children, would become its own ancestor under parent;
        None for another parent of a child this batch's check already gave one (two keys of one
        block naming two parents): this check assumed the first link, which a failed commit
        (the key exists) may not make, so the step must check itself against what is written
        (send it unchecked: it answers "already has a parent", or CHECK_CYCLE)."""
        given = self.given.get(child)
        if given is not None:
            return None if given != parent else False
        above = self.up.get(child)
        if above is None:
            await self._load(child)
            above = self.up[child]
        if above:
            return False  # the batch gave it a parent already: the step itself decides
        top = await self.root(parent)
        return top is None or top == child

    def accept(self, child: str, parent: str) -> None:
        """The batch records this link: later checks see it."""
        if not self.up.get(child):
            self.up[child] = parent
            self.given[child] = parent


async def check_links(
    ctx: Context, links: Sequence[tuple[str, str]], rooted: Iterable[str] = ()
) -> list[bool | None]:
    """For (child, parent) links whose child is a root with children, in batch order: True
    when the link would close a cycle (refuse it), False to send it as checked, None to send it
    unchecked (a second parent for a child: :meth:`ParentChains.closes_cycle`). ``rooted``:
    nodes the batch's link step found without a parent (read no further)."""
    chains = ParentChains(ctx)
    chains.up.update(dict.fromkeys(rooted, ""))
    await chains._load(*(h for link in links for h in link))  # the whole batch at once
    out: list[bool | None] = []
    for child, parent in links:
        bad = await chains.closes_cycle(child, parent)
        if bad is False:
            chains.accept(child, parent)
        out.append(bad)
    return out
