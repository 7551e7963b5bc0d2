"""``mooncake-redis bench-eviction``: the options of :mod:`..bench.eviction` and its printed
lines."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ..bench.eviction import DESCRIPTION, run
from .common import (
    add_redis_url,
    non_negative_int,
    positive_int,
    positive_int_list,
    redis_url,
    scoring,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_redis_url(
        p, help="Redis to measure (default: the embedded store; env MOONCAKE_REDIS_REDIS_URL)"
    )
    p.add_argument(
        "--sizes", type=positive_int_list, default="20000,200000", help="tree sizes in objects"
    )
    p.add_argument(
        "--evict", type=positive_int, default=2000, help="objects evicted per timed pass"
    )
    p.add_argument("--depth", type=positive_int, default=20, help="blocks per chain")
    p.add_argument("--repeat", type=positive_int, default=3, help="timed passes per tree")
    p.add_argument(
        "--num-shards",
        type=non_negative_int,
        default=0,
        help="hash-tag shards (default 0: the store's default, 1 on one Redis, 64 on a cluster)",
    )
    p.add_argument(
        "--policy",
        type=scoring,
        default="lru",
        help="leaf scoring: lru, lru-freq[:W], tiered[:F/X/Y[/G]]",
    )
    p.add_argument("--json", action="store_true", help="one JSON document instead of lines")


def main_args(args: argparse.Namespace) -> int:
    args.redis_url = redis_url(getattr(args, "redis_url", None))
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out))
    elif "ratio_largest_to_smallest" in out:
        print(f"ratio (largest / smallest tree): {out['ratio_largest_to_smallest']:.2f}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench-eviction",
        help="time evicting the same number of objects from a small and a large tree",
        description=DESCRIPTION,
    )
    add_arguments(p)
    p.set_defaults(func=main_args)
