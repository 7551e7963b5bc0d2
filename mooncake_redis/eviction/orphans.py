"""The orphan phase of radix eviction: orphaned subtrees go first.

An orphan root is a node whose parent block has no object left (an explicit remove, a revoke,
an unmount or a client's expiry took it): neither it nor anything below it can ever be a
prefix hit again, so a pass takes these subtrees before any other leaf. Each shard indexes its
orphan roots (``{ns:i}:orphans``, kept by the radix include). A subtree is read level by level
from its root (``radix_get``) and evicted deepest level first through the same fenced write step
as every leaf (``evict_leaves``: a node goes only once it is a leaf, with all its keys), so
invariant 1 holds inside the subtree too; leased, pinned or unfinished objects stay, and their
ancestors with them, until a later pass. Work grows with what is evicted.
"""

from __future__ import annotations

from .. import lua_calls as lua
from .coordinator import EvictorLease
from .goal import EvictionDeps, Goal
from .leaf_write import evict_leaves
from .metrics import EvictionResult

ROOTS_PER_SHARD = 64  # orphan roots read per shard per pass
MAX_SUBTREE_LEVELS = 100_000


class OrphanEvictor:
    def __init__(
        self,
        deps: EvictionDeps,
        lease: EvictorLease,
        result: EvictionResult,
        goal: Goal | None,
        allow_soft: bool = False,
    ) -> None:
        self.deps = deps
        self.lease = lease
        self.result = result
        self.goal = goal  # None: every orphaned subtree (orphan_eviction = "eager")
        self.allow_soft = allow_soft

    def done(self) -> bool:
        return self.goal is not None and self.goal.satisfied()

    async def roots(self) -> list[tuple[int, str, str]]:
        """(marked ms, shard, root) of the oldest orphan roots of every shard, oldest first."""
        self.result.candidate_reads += 1
        roots = await lua.evict_orphans(self.deps.ctx, ROOTS_PER_SHARD)
        return sorted((ms, str(shard), h) for ms, shard, h in roots)

    async def subtree(self, root: str) -> list[list[str]]:
        """The subtree's nodes level by level (root first), each node once."""
        levels = [[root]]
        seen = {root}
        level = [root]
        while level and len(levels) < MAX_SUBTREE_LEVELS:
            nodes = await self.deps.radix.get_nodes(level)
            self.result.candidate_reads += 1
            nxt = [c for n in nodes if n is not None for c in n.children if c not in seen]
            seen.update(nxt)
            if nxt:
                levels.append(nxt)
            level = nxt
        return levels

    async def run(self) -> int:
        """Evicts orphaned subtrees, oldest mark first, until the goal is met (or all of them).
        Returns the objects evicted."""
        before = self.result.evicted_objects
        for _ms, _shard, root in await self.roots():
            if self.done():
                break
            levels = await self.subtree(root)
            keys = self.deps.ctx.keys
            segments = self.goal.segments if self.goal is not None else ()
            for level in reversed(levels):  # deepest first: each node is a leaf by its turn
                todo = [(keys.shard_of(h), h) for h in level]
                usage = None
                while todo:
                    write = await evict_leaves(
                        self.deps, self.lease, self.result, todo, self.allow_soft, segments
                    )
                    outcomes, usage = write.outcomes, write.usage
                    # 'inner': a child on another Redis node went in the same wave; its unlink
                    # has run since, so try once more. Anything else stays for a later pass.
                    retry = [leaf for leaf, o in zip(todo, outcomes) if o.status == "inner"]
                    progress = any(o.status == "ok" for o in outcomes)
                    todo = retry if progress else []
                if self.goal is not None:
                    await self.goal.refresh(usage)
                    if self.done():
                        break
        got = self.result.evicted_objects - before
        self.result.orphan_objects += got
        return got
