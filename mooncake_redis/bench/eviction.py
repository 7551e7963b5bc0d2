"""Eviction cost follows evicted work, not tree size.

Builds, in a namespace of its own on a real Redis (cleaned afterwards), a forest of chains
(conversation-like prefixes: ``--depth`` blocks each, one object per block) for each size in
``--sizes``, then times ``evict_once(max_objects=--evict)`` on it (leaf first, cascading) a few
times, and prints the median times and their ratio. Close figures are the point: a pass reads
one bounded window per shard and then works only on what it evicts.

    mooncake-redis bench-eviction --redis-url redis://127.0.0.1:6379 --sizes 20000,200000
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from blake3 import blake3

from ..config import Config
from ..models import ReplicateConfig, Segment
from .common import check_answers

# The command's help (``mooncake-redis bench-eviction``, :mod:`..cli.bench_eviction`).
DESCRIPTION = """Eviction cost follows evicted work, not tree size.

Builds, in a namespace of its own (removed afterwards), a forest of chains (--depth blocks each,
one object per block) for each size in --sizes, then times evicting --evict objects from it
(leaf first, cascading) --repeat times, and prints the median times and their ratio. Close
figures are the point: a pass reads one bounded window per shard, then works only on what it
evicts."""
OBJ_BYTES = 1024
CLIENT = "bench-evict"


def block(tag: str, chain: int, level: int) -> str:
    return blake3(f"{tag}:{chain}:{level}".encode()).hexdigest()


async def build(svc: Any, tag: str, n: int, depth: int, batch: int = 512) -> float:
    """n objects as n/depth chains of depth blocks, parent first; returns seconds."""
    t0 = time.perf_counter()
    keys: list[str] = []
    cfgs: list[ReplicateConfig] = []

    async def flush() -> None:
        if not keys:
            return
        res = await svc.batch_put_start(CLIENT, keys, [OBJ_BYTES] * len(keys), cfgs)
        ok = [k for k, r in zip(keys, res) if isinstance(r, list)]
        if len(ok) != len(keys):
            bad = next(r for r in res if not isinstance(r, list))
            raise RuntimeError(f"build: {len(keys) - len(ok)} puts refused, e.g. {bad}")
        ended = await svc.batch_put_end(CLIENT, ok)
        check_answers("batch_put_end", ended, len(ok), lambda r: r is None)
        keys.clear()
        cfgs.clear()

    chains = max(1, n // depth)
    for c in range(chains):
        parent = ""
        for level in range(depth):
            b = block(tag, c, level)
            keys.append(b)
            cfgs.append(ReplicateConfig(parent_block_hash=parent))
            parent = b
            if len(keys) >= batch:
                await flush()
    await flush()
    return time.perf_counter() - t0


async def cleanup(url: str, namespace: str) -> None:
    import redis.asyncio as aioredis

    if url.startswith("fakeredis://"):
        return  # the embedded store ends with this process
    r: Any = aioredis.from_url(url.replace("fakeredis+tcp://", "redis://", 1))
    try:
        batch: list[Any] = []
        async for k in r.scan_iter(match="{" + namespace + ":*", count=5000):
            batch.append(k)
            if len(batch) >= 5000:
                await r.unlink(*batch)
                batch.clear()
        if batch:
            await r.unlink(*batch)
    finally:
        await r.aclose()


async def bench_one(
    url: str, size: int, evict: int, depth: int, repeat: int, shards: int, policy: str
) -> dict[str, Any]:
    from ..service import MasterService

    ns = "bev" + uuid.uuid4().hex[:10]
    cfg = Config(
        redis_url=url,
        namespace=ns,
        num_shards=shards,
        enable_radix_tree=True,
        eviction_policy=policy,
        default_kv_lease_ttl_ms=1_000,
    )
    svc = await MasterService.from_url(url, cfg)
    try:
        segs = 4
        per = (size * OBJ_BYTES) // segs + OBJ_BYTES * 64
        for i in range(segs):
            await svc.mount_segment(
                Segment(f"bseg{i}", f"bench{i}", base=(i + 1) << 40, size=per), CLIENT
            )
        build_s = await build(svc, ns, size, depth)
        times: list[float] = []
        evicted: list[int] = []
        depths: list[int] = []
        reads: list[int] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = await svc.evict_once(max_objects=evict)
            times.append(time.perf_counter() - t0)
            evicted.append(r.evicted_objects)
            depths.append(r.cascade_depth)
            reads.append(r.candidate_reads)
        return {
            "objects": size,
            "num_shards": svc.config.num_shards,
            "depth": depth,
            "build_s": round(build_s, 3),
            "evict_s": [round(t, 4) for t in times],
            "evict_median_s": round(statistics.median(times), 4),
            "evicted": evicted,
            "cascade_depth": depths,
            "candidate_reads": reads,
        }
    finally:
        await svc.aclose()
        await cleanup(url, ns)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = args.sizes if isinstance(args.sizes, list) else [int(x) for x in args.sizes.split(",")]
    rows = []
    for size in sizes:
        row = await bench_one(
            args.redis_url, size, args.evict, args.depth, args.repeat, args.num_shards, args.policy
        )
        rows.append(row)
        if not args.json:
            print(
                f"tree of {size:>8,} objects (built in {row['build_s']:.1f} s): evict "
                f"{args.evict:,} objects: median {row['evict_median_s'] * 1000:.1f} ms "
                f"(runs {', '.join(f'{t * 1000:.1f}' for t in row['evict_s'])} ms; evicted "
                f"{row['evicted']}, cascade depth {row['cascade_depth']})",
                flush=True,
            )
    out: dict[str, Any] = {"evict": args.evict, "policy": args.policy, "rows": rows}
    if len(rows) >= 2:
        small, big = rows[0], rows[-1]
        out["ratio_largest_to_smallest"] = round(big["evict_median_s"] / small["evict_median_s"], 3)
    return out
