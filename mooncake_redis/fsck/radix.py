"""fsck's radix checks and the radix repair (which also fixes the orphan index).

They check invariant 5 (every key in the node its prefix names), the edge structure
that invariant 1 rests on (a parent lists every child that names it), the leaf index, and reports
dangling edges (a parent lists a child that does not exist or names another parent): the only
state a crash between two steps of link/unlink can leave. Repair drops dangling edges older than
the grace period, never fresh ones (a link may be half done right now).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..keys import HASH_FIELDS
from ..scan import shard_ids
from ..types import RadixNode
from .report import ALLOWED_KINDS, FsckReport

if TYPE_CHECKING:
    from ..service import MasterService


async def load_nodes(service: MasterService) -> dict[str, RadixNode]:
    nodes: dict[str, RadixNode] = {}
    found = await shard_ids(service.backend, service.keys, "node")
    for shard in range(service.keys.num_shards):
        batch = found.get(shard, [])
        for start in range(0, len(batch), 512):
            part = batch[start : start + 512]
            for h, node in zip(part, await service.get_nodes(part)):
                if node is not None:
                    nodes[h] = node
    return nodes


async def load_leaves(service: MasterService) -> set[str]:
    leaves: set[str] = set()
    for shard in range(service.keys.num_shards):
        members = await service.backend.client.zrange(
            service.keys.shard_key(shard, "leaves"), 0, -1
        )
        leaves.update(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    return leaves


async def _confirm_leaf_index(service: MasterService, report: FsckReport) -> None:
    """Nodes and the leaf index are read one after the other, so on a live store an eviction
    or a link in between looks like a wrong leaf index. Re-read each suspect node with its
    index membership in one transaction (one hash tag) and keep only what is still wrong."""
    suspects = [p for p in report.problems if p.kind == "leaf_index"]
    if not suspects:
        return
    keys = service.keys
    gone: set[int] = set()
    for i, p in enumerate(suspects):
        shard = keys.shard_of(p.node)
        pipe = service.backend.client.pipeline(transaction=True)
        pipe.hget(keys.node(shard, p.node), HASH_FIELDS["node"]["created_ms"])  # a node has t
        pipe.hget(keys.node(shard, p.node), HASH_FIELDS["node"]["nkeys"])
        pipe.hget(keys.node(shard, p.node), HASH_FIELDS["node"]["nchildren"])
        pipe.zscore(keys.shard_key(shard, "leaves"), p.node)
        exists, nkeys, nchildren, score = await pipe.execute()
        expected = exists is not None and int(nkeys or 0) > 0 and int(nchildren or 0) == 0
        if expected == (score is not None):
            gone.add(i)
    if gone:
        drop = {id(suspects[i]) for i in gone}
        report.problems[:] = [p for p in report.problems if id(p) not in drop]


async def check_radix(service: MasterService, report: FsckReport, now: int) -> None:
    nodes = await load_nodes(service)
    report.cache["nodes"] = nodes
    leaves = await load_leaves(service)
    report.counts.update(
        nodes=len(nodes),
        registered_keys=sum(len(n.keys) for n in nodes.values()),
        leaves=sum(1 for n in nodes.values() if n.is_leaf and not n.is_shell),
        shells=sum(1 for n in nodes.values() if n.is_shell),
        max_depth=0,
    )
    for h, node in nodes.items():
        for child, gen in node.child_generations.items():
            c = nodes.get(child)
            if c is None:
                report.add(
                    "dangling_edge", h, f"{h} lists child {child} that does not exist", now - gen
                )
            elif c.parent_prefix_hash != h:
                report.add(
                    "stray_edge",
                    h,
                    f"{h} lists child {child} whose parent is {c.parent_prefix_hash!r}",
                    now - gen,
                )
        p = node.parent_prefix_hash
        if p:
            parent = nodes.get(p)
            if parent is None:
                report.add("missing_parent", h, f"{h} names parent {p} that does not exist")
            elif h not in parent.child_generations:
                report.add("missing_edge", h, f"parent {p} does not list its child {h}")
        if not node.keys and not node.children:
            report.add("empty_node", h, f"{h} has no keys and no children")
        expected_leaf = bool(node.keys) and not node.children
        if expected_leaf != (h in leaves):
            report.add(
                "leaf_index",
                h,
                f"{h} leaf index membership is {h in leaves}, expected {expected_leaf}",
            )
        for key in node.keys:
            if service.prefix_of(key) != h:
                report.add("wrong_node", h, f"key {key!r} belongs to {service.prefix_of(key)!r}")
    for h in leaves - nodes.keys():
        report.add("leaf_index", h, f"leaf index lists {h} that is not a node")
    await _confirm_leaf_index(service, report)
    # Parent chains: depth histogram and cycles (cascades stop at a cycle; fsck names it).
    depth: dict[str, int] = {}
    for h in nodes:
        path: list[str] = []
        seen: set[str] = set()
        cur: str | None = h
        while cur and cur in nodes and cur not in depth:
            if cur in seen:
                ring = path[path.index(cur) :]
                # Repair breaks it at the newest link (most likely the one that closed it).
                newest = max(ring, key=lambda x: (nodes[x].link_generation, x))
                found = report.add(
                    "cycle", newest, "parent chain cycles: " + " -> ".join([*path, cur])
                )
                found.members = ring
                for x in path:
                    depth[x] = -1
                break
            seen.add(cur)
            path.append(cur)
            cur = nodes[cur].parent_prefix_hash or None
        base = depth.get(cur, 0) if cur in depth else 0
        for i, x in enumerate(reversed(path)):
            depth.setdefault(x, base + i + 1)
    report.counts["max_depth"] = max(depth.values(), default=0)


async def repair_radix(service: MasterService, report: FsckReport, grace_ms: int) -> None:
    unlinks: list[tuple[str, int, str, str]] = []
    collapse: list[tuple[int, list[str]]] = []
    for p in report.problems:
        if p.kind in ALLOWED_KINDS and p.age_ms is not None and p.age_ms > grace_ms:
            child = p.detail.split(" lists child ")[1].split(" ")[0]
            [node] = await service.get_nodes([p.node])
            if node is None or child not in node.child_generations:
                continue
            gen = node.child_generations[child]
            unlinks.append((p.node, service.keys.shard_of(p.node), child, str(gen)))
            p.repaired = True
        elif p.kind == "empty_node":
            collapse.append((service.keys.shard_of(p.node), ["collapse", p.node]))
            p.repaired = True
        elif p.kind == "leaf_index":
            collapse.append((service.keys.shard_of(p.node), ["leaf", p.node]))
            p.repaired = True
        elif p.kind == "cycle":
            # The node forgets its parent and becomes a root; the parent's edge goes.
            [node] = await service.get_nodes([p.node])
            if node is not None and node.parent_prefix_hash in p.members:
                op = "unparent:" + node.parent_prefix_hash
                collapse.append((service.keys.shard_of(p.node), [op, p.node]))
                p.repaired = True
    # The orphan index: mark the roots it misses, unmark what it keeps wrongly.
    for op, name in (("orphan", "orphan_unindexed"), ("adopt", "orphan_stale")):
        for h in report.cache.get(name, []):
            unlinks.append((h, service.keys.shard_of(h), "", op))
    conts: list[Any] = []
    if collapse:
        for _, (_, cs) in await service.run_sharded("radix_repair", collapse):
            conts.extend(cs)
    await service.finish_unlinks([*unlinks, *conts])
