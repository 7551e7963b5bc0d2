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

from ..backend import redact
from ..errors import ErrorCode, MooncakeError
from ..keys import HASH_FIELDS, node_key_field
from ..records import (
    alloc_bucket_of,
    decode_replicas,
    object_fields,
    parse_alloc_record,
    segment_table,
)
from ..service import MasterService
from .common import describe_store, env_redis_url, non_negative_int, warn
from .options import add_config_args, config_from_args


def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _decode_hash(raw: Any) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in (raw or {}).items()}


NOT_SUMMED = frozenset({"fence"})  # per-shard values that a total would make meaningless


def _add_inspect_options(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="one JSON document instead of tables",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="show counters, a radix node, an object or a subtree",
        description="Look inside a namespace (reads Redis directly, no worker needed).\n"
        "Options may come before or after WHAT: inspect stats --json.",
    )
    _add_inspect_options(p)
    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    stats = what.add_parser("stats", help="per-shard counters, segments, clients, evictor lease")
    node = what.add_parser("node", help="one radix node: shard, Redis keys, keys, children")
    node.add_argument("hash")
    key = what.add_parser("key", help="one object: shard, metadata, replicas, radix node")
    key.add_argument("key")
    tree = what.add_parser("tree", help="the subtree under a node")
    tree.add_argument("hash")
    tree.add_argument(
        "--depth",
        type=non_negative_int,
        default=4,
        help="levels below the node to show (0 = the node alone)",
    )
    for sub in (stats, node, key, tree):
        _add_inspect_options(sub)
    p.set_defaults(func=run_inspect)

    f = subparsers.add_parser(
        "fsck",
        help="check the invariants (exit 0 only when clean)",
        description="Check every invariant; --repair fixes what the protocol allows.\n"
        "Exit 0 when clean, 1 when problems remain, 2 when it could not run.",
    )
    add_config_args(f)
    f.add_argument("--repair", action="store_true", help="repair what is safe to repair")
    f.add_argument(
        "--grace-ms",
        type=non_negative_int,
        default=None,
        help="repair dangling edges older than this (default: Config.dangling_edge_grace_ms)",
    )
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    f.set_defaults(func=run_fsck)


def _run(args: argparse.Namespace, body: Callable[[MasterService], Awaitable[int]]) -> int:
    """Runs ``body`` on a service of the configured namespace; errors reach the CLI's guard."""
    config = config_from_args(args)
    if not (getattr(args, "redis_url", None) or env_redis_url()):  # the default: embedded
        warn(
            f"{args.command} reads the embedded store of this process, which starts empty: "
            "give --redis-url or set MOONCAKE_REDIS_REDIS_URL to look at a real one"
        )

    async def main() -> int:
        service = await MasterService.from_url(config.redis_url, config, create=False)
        try:
            return await body(service)
        finally:
            await service.aclose()

    return asyncio.run(main())


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
            if k not in NOT_SUMMED:
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
        "now_ms": now,
    }


async def gather_node(service: MasterService, h: str) -> dict[str, Any]:
    keys = service.keys
    shard = keys.shard_of(h)
    [node] = await service.get_nodes([h])
    redis_keys = {"node": keys.node(shard, h)}
    doc: dict[str, Any] = {
        "prefix_hash": h,
        "shard": shard,
        "tag": keys.shard_tag(shard),
        "redis_keys": redis_keys,
        "redis_cli": [
            f"HGETALL '{redis_keys['node']}'",
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
    meta = object_fields(await service.backend.client.hgetall(okey))
    client_id: str | None = None
    if "c" in meta:
        raw = await service.backend.client.hget(keys.shard_key(shard, "cids"), meta["c"])
        client_id = None if raw is None else _s(raw)
    replicas: Any = None
    if "r" in meta:
        try:
            segs = await service.backend.client.hgetall(keys.shard_key(shard, "segs"))
            replicas = decode_replicas(meta["r"], segment_table(segs))
        except ValueError:
            replicas = meta["r"]
    node = keys.node(shard, prefix)
    registered = bool(await service.backend.client.hexists(node, node_key_field(prefix, key)))
    allocations = [
        await gather_allocation(service, r["seg"], r["off"])
        for r in (replicas if isinstance(replicas, list) else [])
    ]
    return {
        "key": key,
        "prefix_hash": prefix,
        "shard": shard,
        "tag": keys.shard_tag(shard),
        "redis_key": okey,
        "redis_cli": f"HGETALL '{okey}'",
        "exists": bool(meta),
        "metadata": meta,
        "client_id": client_id,  # c is its ref in the shard's client table (cids)
        "replicas": replicas,
        "registered_in_node": registered,
        "node_redis_key": node,
        "allocations": allocations,
    }


async def gather_allocation(service: MasterService, segment_id: str, offset: int) -> dict[str, Any]:
    """The allocation record of a buffer, decoded (lua/includes/alloc.lua: bucket offset >> ak,
    field offset mod 2^ak, both hex; the record ``len|put id|ms`` and the owner field)."""
    client = service.backend.client
    out: dict[str, Any] = {"segment": segment_id, "offset": offset, "record": None}
    shift = await client.hget(
        service.keys.segment_anchor(segment_id), HASH_FIELDS["info"]["bucket_shift"]
    )
    if not shift:
        return out
    bucket, field = alloc_bucket_of(offset, int(shift))
    bkey = service.keys.alloc_bucket(segment_id, bucket)
    out.update(redis_key=bkey, field=field, redis_cli=f"HMGET '{bkey}' {field} {field}k")
    rec, owner = await client.hmget(bkey, [field, field + "k"])
    if rec is not None:
        r = parse_alloc_record(rec, owner if owner is not None else b"<")
        out["record"] = {
            "length": r.length,
            "put_id": r.put_id,
            "pending_ms": r.ms,
            "owner": r.owner,
        }
    return out


async def gather_tree(service: MasterService, h: str, depth: int) -> dict[str, Any]:
    sub = await service.get_subtree_keys(h, depth)
    from ..server.schemas import subtree_to_json

    doc = subtree_to_json(sub)
    for n in doc["nodes"]:
        n["shard"] = service.keys.shard_of(n["prefix_hash"])
    return doc


def run_inspect(args: argparse.Namespace) -> int:
    from . import inspect_view as view

    async def body(service: MasterService) -> int:
        doc: dict[str, Any]
        if args.what == "stats":
            doc, printer = await gather_stats(service), view.print_stats
        elif args.what == "node":
            doc, printer = await gather_node(service, args.hash), view.print_node
        elif args.what == "key":
            doc, printer = await gather_key(service, args.key), view.print_key
        else:
            try:
                doc = await gather_tree(service, args.hash, args.depth)
            except MooncakeError as exc:
                if exc.code != ErrorCode.OBJECT_NOT_FOUND:
                    raise
                print(f"inspect: {exc}", file=sys.stderr)
                return 1
            printer = view.print_tree
        if getattr(args, "json", False):
            _emit_json(doc)
        else:
            if args.what in ("node", "key"):
                doc["now_ms"] = await service.backend.time_ms()
            printer(doc)
        return 1 if doc.get("exists") is False else 0

    return _run(args, body)


# -- fsck ---------------------------------------------------------------------------------------


def run_fsck(args: argparse.Namespace) -> int:
    from ..fsck import fsck

    async def body(service: MasterService) -> int:
        report = await fsck(service, repair=args.repair, grace_ms=args.grace_ms)
        doc = report.to_dict()
        if args.repair:
            fixed = sum(1 for p in report.problems if p.repaired)
            doc.update(repaired=fixed, not_repaired=len(report.problems) - fixed)
        if args.json:
            _emit_json(doc)
        else:
            from .inspect_view import print_fsck

            cfg = service.config
            grace = cfg.dangling_edge_grace_ms if args.grace_ms is None else args.grace_ms
            where = f"{describe_store(cfg.redis_url)}, namespace {cfg.namespace}"
            print_fsck(report, where, repair=args.repair, grace_ms=grace)
        return 0 if report.clean else 1

    return _run(args, body)
