"""``mooncake-redis inspect`` and ``mooncake-redis fsck``: look inside a namespace.

``inspect stats|node HASH|key KEY|tree HASH [--depth N]`` prints readable tables and trees
(rich); ``--json`` prints one JSON document for scripts. ``fsck [--repair] [--json]`` exits 0 only
when the namespace is clean, 1 when problems remain, 2 when it could not run.
Both talk to Redis directly (no worker needed), with the same options and MOONCAKE_REDIS_*
variables as ``serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from .backend import redact
from .errors import ErrorCode, MooncakeError
from .records import decode_replicas
from .server.cliopts import add_config_args, config_from_args
from .service import MasterService


def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _decode_hash(raw: Any) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in (raw or {}).items()}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="show counters, a radix node, an object or a subtree",
        description="Look inside a namespace (reads Redis directly).",
    )
    add_config_args(p)
    p.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    what.add_parser("stats", help="per-shard counters, segments, clients, evictor lease")
    node = what.add_parser("node", help="one radix node: shard, Redis keys, keys, children")
    node.add_argument("hash")
    key = what.add_parser("key", help="one object: shard, metadata, replicas, radix node")
    key.add_argument("key")
    tree = what.add_parser("tree", help="the subtree under a node")
    tree.add_argument("hash")
    tree.add_argument("--depth", type=int, default=4, help="levels below the node (default 4)")
    p.set_defaults(func=run_inspect)

    f = subparsers.add_parser(
        "fsck",
        help="check the invariants (exit 0 only when clean)",
        description="Check every invariant; --repair fixes what the protocol allows.",
    )
    add_config_args(f)
    f.add_argument("--repair", action="store_true", help="repair what is safe to repair")
    f.add_argument(
        "--grace-ms",
        type=int,
        default=None,
        help="repair dangling edges older than this (default: Config.dangling_edge_grace_ms)",
    )
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    f.set_defaults(func=run_fsck)


def _run(args: argparse.Namespace, body: Callable[[MasterService], Awaitable[int]]) -> int:
    try:
        config = config_from_args(args)
    except MooncakeError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2

    async def main() -> int:
        service = await MasterService.from_url(config.redis_url, config, create=False)
        try:
            return await body(service)
        finally:
            await service.aclose()

    try:
        return asyncio.run(main())
    except MooncakeError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{args.command}: cannot reach {redact(config.redis_url)}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # redis errors etc.: one line, no traceback, no secret
        print(f"{args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _emit_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, sort_keys=True, default=str))


# -- inspect ------------------------------------------------------------------------------------


async def gather_stats(service: MasterService) -> dict[str, Any]:
    keys = service.keys
    client = service.backend.client
    shards = []
    totals: dict[str, int] = {}
    for shard in range(keys.num_shards):
        stats = _decode_hash(await client.hgetall(keys.anchor(shard)))
        leaves = int(await client.zcard(keys.shard_key(shard, "leaves")))
        row: dict[str, Any] = {"shard": shard, "tag": keys.shard_tag(shard), "leaves": leaves}
        for k, v in stats.items():
            try:
                row[k] = int(float(v))
            except ValueError:
                row[k] = v
                continue
            totals[k] = totals.get(k, 0) + row[k]
        totals["leaves"] = totals.get("leaves", 0) + leaves
        shards.append(row)
    segments = []
    if hasattr(service, "segment_stats"):
        segments = [s.to_dict() for s in await service.segment_stats()]
    now = await service.backend.time_ms()
    clients = {
        _s(m): int(sc)
        for m, sc in await client.zrange(keys.global_key("clients"), 0, -1, withscores=True)
    }
    live_ms = service.config.client_live_ttl_ms
    return {
        "namespace": service.config.namespace,
        "num_shards": keys.num_shards,
        "redis": redact(service.config.redis_url),
        "totals": totals,
        "shards": shards,
        "segments": segments,
        "clients": {c: {"last_ping_ms": t, "live": now - t <= live_ms} for c, t in clients.items()},
        "evictor": _decode_hash(await client.hgetall(keys.global_key("evictor"))),
        "meta": _decode_hash(await client.hgetall(keys.global_key("meta"))),
    }


async def gather_node(service: MasterService, h: str) -> dict[str, Any]:
    keys = service.keys
    shard = keys.shard_of(h)
    [node] = await service.get_nodes([h])
    redis_keys = {
        "node": keys.node(shard, h),
        "keys": keys.node_keys(shard, h),
        "children": keys.node_children(shard, h),
    }
    doc: dict[str, Any] = {
        "prefix_hash": h,
        "shard": shard,
        "tag": keys.shard_tag(shard),
        "redis_keys": redis_keys,
        "redis_cli": [
            f"HGETALL '{redis_keys['node']}'",
            f"SMEMBERS '{redis_keys['keys']}'",
            f"ZRANGE '{redis_keys['children']}' 0 -1 WITHSCORES",
        ],
        "exists": node is not None,
    }
    if node is not None:
        leaf_score = await service.backend.client.zscore(keys.shard_key(shard, "leaves"), h)
        doc.update(
            parent_prefix_hash=node.parent_prefix_hash,
            parent_shard=(
                keys.shard_of(node.parent_prefix_hash) if node.parent_prefix_hash else None
            ),
            keys=node.keys,
            children={c: {"generation": g, "shard": keys.shard_of(c)}
                      for c, g in node.child_generations.items()},
            is_shell=node.is_shell,
            is_leaf=node.is_leaf,
            in_leaf_index=leaf_score is not None,
            created_ms=node.created_ms,
            score=node.score,
            hits=node.hits,
            link_generation=node.link_generation,
        )  # fmt: skip
    return doc


async def gather_key(service: MasterService, key: str) -> dict[str, Any]:
    keys = service.keys
    prefix = service.prefix_of(key)
    shard = keys.shard_of(prefix)
    okey = keys.obj(shard, key)
    meta = _decode_hash(await service.backend.client.hgetall(okey))
    replicas: Any = None
    if "r" in meta:
        try:
            replicas = decode_replicas(meta["r"])
        except ValueError:
            replicas = meta["r"]
    registered = bool(await service.backend.client.sismember(keys.node_keys(shard, prefix), key))
    return {
        "key": key,
        "prefix_hash": prefix,
        "shard": shard,
        "tag": keys.shard_tag(shard),
        "redis_key": okey,
        "redis_cli": f"HGETALL '{okey}'",
        "exists": bool(meta),
        "metadata": meta,
        "replicas": replicas,
        "registered_in_node": registered,
        "node_redis_key": keys.node(shard, prefix),
    }


async def gather_tree(service: MasterService, h: str, depth: int) -> dict[str, Any]:
    sub = await service.get_subtree_keys(h, depth)
    from .server.schemas import subtree_to_json

    doc = subtree_to_json(sub)
    for n in doc["nodes"]:
        n["shard"] = service.keys.shard_of(n["prefix_hash"])
    return doc


def _short(h: str, n: int = 12) -> str:
    return h if len(h) <= n + 3 else h[:n] + "…"


def _print_stats(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(
        f"[bold]namespace[/] {doc['namespace']}  shards {doc['num_shards']}  redis {doc['redis']}"
    )
    t = Table(title="totals")
    t.add_column("counter")
    t.add_column("value", justify="right")
    for k, v in sorted(doc["totals"].items()):
        t.add_row(k, str(v))
    con.print(t)
    fields = sorted({k for row in doc["shards"] for k in row} - {"shard", "tag"})
    st = Table(title="per shard (non-empty)")
    st.add_column("shard", justify="right")
    for f in fields:
        st.add_column(f, justify="right")
    for row in doc["shards"]:
        if any(row.get(f) for f in fields):
            st.add_row(str(row["shard"]), *(str(row.get(f, "")) for f in fields))
    con.print(st)
    if doc["segments"]:
        sg = Table(title="segments")
        cols = ("id", "client_id", "size", "allocated", "mounted", "allocations", "pending")
        for c in cols:
            sg.add_column(c)
        for s in doc["segments"]:
            sg.add_row(*(str(s.get(c, "")) for c in cols))
        con.print(sg)
    live = sum(1 for c in doc["clients"].values() if c["live"])
    con.print(
        f"clients: {len(doc['clients'])} ({live} live)   evictor lease: {doc['evictor'] or '-'}"
    )


def _print_node(doc: dict[str, Any]) -> None:
    from rich.console import Console

    con = Console()
    con.print(f"[bold]node[/] {doc['prefix_hash']}")
    con.print(f"shard {doc['shard']}  tag {doc['tag']}")
    if not doc["exists"]:
        con.print("[red]no such node[/]")
        return
    kind = "shell" if doc["is_shell"] else ("leaf" if doc["is_leaf"] else "inner")
    con.print(
        f"{kind}; parent {doc['parent_prefix_hash'] or '(root)'}"
        + (f" (shard {doc['parent_shard']})" if doc["parent_shard"] is not None else "")
    )
    con.print(f"created {doc['created_ms']}  score {doc['score']}  hits {doc['hits']}  "
              f"in leaf index {doc['in_leaf_index']}")  # fmt: skip
    con.print(f"[bold]keys[/] ({len(doc['keys'])}):")
    for k in doc["keys"]:
        con.print(f"  {k}", markup=False, soft_wrap=True)
    con.print(f"[bold]children[/] ({len(doc['children'])}):")
    for c, info in doc["children"].items():
        con.print(f"  {c}  shard {info['shard']}  generation {info['generation']}", soft_wrap=True)
    con.print("[bold]redis-cli[/]:")
    for cmd in doc["redis_cli"]:
        con.print(f"  redis-cli {cmd}", markup=False, soft_wrap=True)


def _print_key(doc: dict[str, Any]) -> None:
    from rich.console import Console

    con = Console()
    con.print(f"[bold]key[/] {doc['key']}", markup=True)
    con.print(f"prefix {doc['prefix_hash']}  shard {doc['shard']}  redis key {doc['redis_key']}")
    if not doc["exists"]:
        con.print("[red]no such object[/]")
    else:
        for k, v in sorted(doc["metadata"].items()):
            if k != "r":
                con.print(f"  {k} = {v}", markup=False)
        for r in doc["replicas"] or []:
            con.print(f"  replica {r}", markup=False)
    con.print(f"registered in its radix node: {doc['registered_in_node']}")


def _print_tree(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.tree import Tree

    nodes = {n["prefix_hash"]: n for n in doc["nodes"]}

    def label(n: dict[str, Any]) -> str:
        kind = "shell" if n["is_shell"] else ("leaf" if n["is_leaf"] else "node")
        return f"{_short(n['prefix_hash'])} [dim]shard {n['shard']} {kind} {len(n['keys'])} keys[/]"

    root = nodes[doc["root"]]
    tree = Tree(label(root))
    stack = [(root, tree)]
    seen = {doc["root"]}
    while stack:
        n, branch = stack.pop()
        for c in n["children"]:
            if c in nodes and c not in seen:
                seen.add(c)
                stack.append((nodes[c], branch.add(label(nodes[c]))))
            elif c not in nodes:
                branch.add(f"{_short(c)} [dim](below --depth)[/]")
    con = Console()
    con.print(tree)
    con.print(
        f"{len(nodes)} nodes, {len(doc['keys'])} keys, depth {doc['depth_reached']}"
        + (" (truncated)" if doc["truncated"] else "")
    )


def run_inspect(args: argparse.Namespace) -> int:
    async def body(service: MasterService) -> int:
        if args.what == "stats":
            doc = await gather_stats(service)
            printer = _print_stats
        elif args.what == "node":
            doc = await gather_node(service, args.hash)
            printer = _print_node
        elif args.what == "key":
            doc = await gather_key(service, args.key)
            printer = _print_key
        else:
            if args.depth < 0:
                raise MooncakeError(ErrorCode.INVALID_PARAMS, "--depth: a non-negative integer")
            try:
                doc = await gather_tree(service, args.hash, args.depth)
            except MooncakeError as exc:
                if exc.code != ErrorCode.OBJECT_NOT_FOUND:
                    raise
                print(f"inspect: {exc.message}", file=sys.stderr)
                return 1
            printer = _print_tree
        if args.json:
            _emit_json(doc)
        else:
            printer(doc)
        return 1 if doc.get("exists") is False else 0

    return _run(args, body)


# -- fsck ---------------------------------------------------------------------------------------


def run_fsck(args: argparse.Namespace) -> int:
    from .fsck import fsck

    async def body(service: MasterService) -> int:
        report = await fsck(service, repair=args.repair, grace_ms=args.grace_ms)
        if args.json:
            _emit_json(report.to_dict())
        else:
            from rich.console import Console

            con = Console()
            counts = "  ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
            con.print(f"[bold]fsck[/] {redact(service.config.redis_url)} "
                      f"namespace {service.config.namespace}")  # fmt: skip
            con.print(counts)
            for p in report.problems:
                state = "[green]repaired[/]" if p.repaired else "[red]problem[/]"
                con.print(f"{state} {p.kind} {p.node}: {p.detail}", highlight=False)
            con.print("[green]clean[/]" if report.clean else f"[red]not clean[/]: {report.kinds()}")
        return 0 if report.clean else 1

    return _run(args, body)
