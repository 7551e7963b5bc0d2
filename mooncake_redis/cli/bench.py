"""``mooncake-redis bench``: the figures of docs/benchmarks.md, printed as tables.

Sections: prefix (index vs SCAN at two sizes), throughput (batch-128 exists/put vs a naive
baseline and the real Mooncake master), workers (the same calls in process, through one worker
and through three, and the HTTP hop's cost), roundtrips (commands per call), memory (bytes per
object), eviction (same evicted count at two tree sizes), codec (the Mooncake wire codec alone),
wire (the real Mooncake client against the real master and against one and three workers).
Ratios are against baselines measured in the same run, since the machine is shared and noisy.
--json prints the figures as JSON, --out FILE writes them; nothing is written unasked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from .common import add_redis_url, choice_list, describe_store, non_negative_int, redis_url

SECTIONS = (
    "prefix", "throughput", "workers", "roundtrips", "memory", "eviction", "codec", "wire"
)  # fmt: skip


def _section(name: str, args: argparse.Namespace) -> Callable[[], Awaitable[Any]] | None:
    url = args.redis_url
    if name == "prefix":
        from ..bench.prefix import bench_prefix

        sizes = (10_000, 100_000) if args.quick else (10_000, 1_000_000)
        return lambda: bench_prefix(url, sizes, num_shards=args.num_shards)
    if name == "throughput":
        from ..bench.throughput import bench_throughput

        return lambda: bench_throughput(
            url, n_batches=50 if args.quick else 200, num_shards=args.num_shards
        )
    if name == "workers":
        from ..bench.workers import run_bench

        async def workers() -> Any:
            # Worker processes share the store: the embedded one is served to them over TCP.
            from ..backend import EmbeddedTcpServer

            embedded = EmbeddedTcpServer() if url.startswith("fakeredis://") else None
            try:
                return await run_bench(
                    embedded.url if embedded else url,
                    seconds=seconds,
                    num_shards=args.num_shards,
                )
            finally:
                if embedded is not None:
                    embedded.close()

        seconds = 1.0 if args.quick else 3.0
        return workers
    if name == "roundtrips":
        from ..bench.throughput import bench_round_trips

        return lambda: bench_round_trips(url, num_shards=args.num_shards)
    if name == "memory":
        from ..bench.memory import bench_memory

        objects = args.memory_objects or (20_000 if args.quick else 100_000)
        return lambda: bench_memory(url, objects=objects, num_shards=args.num_shards)
    if name == "codec":
        from ..bench.wire import bench_codec

        return lambda: asyncio.to_thread(bench_codec)
    if name == "wire":
        from ..bench.wire import bench_wire

        if args.quick:
            return lambda: bench_wire(url, seconds=0.3, rounds=1, num_shards=args.num_shards)
        return lambda: bench_wire(url, seconds=3.0, rounds=2, num_shards=args.num_shards)
    if name == "eviction":
        from ..bench.eviction import run as run_eviction

        tree_sizes = "2000,20000" if args.quick else "20000,200000"
        ns = argparse.Namespace(
            redis_url=url,
            sizes=tree_sizes,
            evict=200 if args.quick else 2000,
            depth=20,
            repeat=3,
            num_shards=args.num_shards,
            policy="lru",
            json=True,
        )
        return lambda: run_eviction(ns)
    raise ValueError(name)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    console = Console(stderr=True)
    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "redis_url": describe_store(args.redis_url),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for name in args.sections:
        fn = _section(name, args)
        if fn is None:
            results[name] = "not available in this build"
            continue
        console.print(f"[bold]bench {name}[/bold] ...")
        t0 = time.perf_counter()
        results[name] = await fn()
        if not args.json:
            from ..bench.tables import section_tables

            for table in section_tables(name, results[name]):
                Console().print(table)
        console.print(f"  ({time.perf_counter() - t0:.1f} s)")
    return results


# Sections that need a Redis server: what they measure does not exist in the embedded store.
NEEDS_SERVER = {"memory": "Redis INFO memory"}


def main(args: argparse.Namespace) -> int:
    args.redis_url = redis_url(args.redis_url)
    err = Console(stderr=True)
    if args.redis_url.startswith("fakeredis"):
        err.print(
            "note: measuring the embedded store (fakeredis in this process), several times "
            "slower than Redis; give --redis-url redis://127.0.0.1:6379 for the figures of "
            "docs/benchmarks.md",
            highlight=False,
        )
        skipped = [s for s in args.sections if s in NEEDS_SERVER]
        for s in skipped:
            err.print(f"note: skipping {s}: it needs {NEEDS_SERVER[s]}", highlight=False)
        args.sections = [s for s in args.sections if s not in NEEDS_SERVER]
    else:
        err.print(f"bench on {describe_store(args.redis_url)}", highlight=False)
    results = asyncio.run(run(args))
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
        err.print(f"wrote {args.out}", highlight=False)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="benchmarks: prefix query, throughput, workers, round trips, memory, eviction",
        description=(__doc__ or "").split("\n", 1)[1].strip(),
    )
    add_redis_url(
        p,
        help="Redis to measure (default: the embedded store; env MOONCAKE_REDIS_REDIS_URL); "
        "a fresh namespace per section, removed afterwards",
    )
    p.add_argument(
        "--sections",
        type=choice_list(SECTIONS),
        default=list(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)",
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    p.add_argument(
        "--memory-objects",
        type=int,
        metavar="N",
        help="objects the memory section stores per key format (default 100,000; --quick 20,000)",
    )
    p.add_argument(
        "--num-shards",
        type=non_negative_int,
        default=0,
        help="hash-tag shards of each section's namespace (default 0: what a user gets, 1 on "
        "one Redis and 64 on a cluster; the figures say which)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON, no tables")
    p.add_argument("--out", metavar="FILE", help="also write the figures as JSON to FILE")
    p.set_defaults(func=main)
