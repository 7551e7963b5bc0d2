"""The orphan check: a stored object whose parent node has no stored key.

It reads what the radix and store checks cached (the nodes, the stored object keys), so it runs
after both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..types import RadixNode
from .report import FsckReport

if TYPE_CHECKING:
    from ..service import MasterService


async def check_orphans(service: MasterService, report: FsckReport, now: int) -> None:
    """Orphans: objects of a node whose parent block has no object (the block was removed,
    revoked, unmounted, or its client expired; or, with the put guard off, never stored).
    Counted, never a problem in itself (explicit removes may leave them; eviction takes them
    first). The shards' orphan index is kept by the erase and put steps; roots it misses (a
    crash between an erase and its mark, the guard off, Path B parents without objects) and
    marks it keeps wrongly are counted too, and ``--repair`` fixes both."""
    nodes: dict[str, RadixNode] = report.cache.get("nodes", {})
    objects: set[str] = report.cache.get("objects", set())
    stored = {h for h, n in nodes.items() if any(k in objects for k in n.keys)}
    roots = {
        h
        for h in stored
        if nodes[h].parent_prefix_hash and nodes[h].parent_prefix_hash not in stored
    }
    below: set[str] = set()
    todo = list(roots)
    while todo:
        h = todo.pop()
        for c in nodes[h].children if h in nodes else []:
            if c in nodes and c not in below and c not in roots:
                below.add(c)
                todo.append(c)
    report.counts["orphans"] = sum(sum(k in objects for k in nodes[h].keys) for h in roots)
    report.counts["orphan_roots"] = len(roots)
    report.counts["orphaned_subtree_objects"] = report.counts["orphans"] + sum(
        sum(k in objects for k in nodes[h].keys) for h in below
    )
    marked: set[str] = set()
    for shard in range(service.keys.num_shards):
        members = await service.backend.client.zrange(
            service.keys.shard_key(shard, "orphans"), 0, -1
        )
        marked.update(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    report.cache["orphan_unindexed"] = sorted(roots - marked)
    report.cache["orphan_stale"] = sorted(marked - roots)
    report.counts["orphan_roots_unindexed"] = len(roots - marked)
    report.counts["orphan_marks_stale"] = len(marked - roots)
