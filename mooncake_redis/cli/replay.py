"""Subcommands ``replay`` and ``demo``: their parsers, mounted on the top-level CLI by
:func:`register`; :mod:`.replay_run` runs them."""

from __future__ import annotations

import argparse
from typing import Any

from mooncake_redis.cli.common import (
    add_redis_url,
    non_negative_int,
    positive_float,
    positive_int,
    positive_int_list,
)
from mooncake_redis.config import DEFAULT_EVICTION_POLICY
from mooncake_redis.replay import traces
from mooncake_redis.replay.trace import KEY_FORMATS

from .replay_run import (
    POLICIES,
    _env,
    leaf_policy,
    run_demo,
    run_replay,
)


def _add_store_options(p: argparse.ArgumentParser) -> None:
    add_redis_url(
        p,
        help="Redis URL of our store (default: a fresh embedded store per run; "
        "env MOONCAKE_REDIS_REDIS_URL)",
    )
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default=_env("REPLAY_POLICY", "radix"),
        help="radix: leaf-first eviction and the radix index; batch-evict: Mooncake's BatchEvict",
    )
    p.add_argument(
        "--scoring",
        type=leaf_policy,
        default=_env("EVICTION_POLICY", DEFAULT_EVICTION_POLICY),
        help=(
            "radix leaf policy: tiered[:F/X/Y[/G]], lru or lru-freq[:W] on our store; on the "
            "model also every candidate of the policy study, e.g. arc, s3fifo, 2q, lru-refs "
            f"(default {DEFAULT_EVICTION_POLICY})"
        ),
    )
    p.add_argument(
        "--compare",
        default=None,
        metavar="NAMES",
        help=(
            "comma-separated radix leaf policies: replay the trace once per policy (and per "
            "--target) and print one comparison table (hit rate, orphans, incomplete blocks, "
            "evictions); a real Mooncake target runs once"
        ),
    )
    p.add_argument(
        "--key-format",
        choices=KEY_FORMATS,
        default="mla",
        help="mla: one object per block; mha: a K and a V object per TP rank",
    )
    p.add_argument(
        "--tp", type=positive_int, default=1, help="tensor-parallel ranks (mha: 2*tp keys/block)"
    )
    p.add_argument(
        "--engines",
        type=non_negative_int,
        default=0,
        help="tiered mode: N engines with their own host caches, routed at random (0 = off)",
    )
    p.add_argument(
        "--host-cache-blocks",
        type=non_negative_int,
        default=0,
        help="host cache size per engine, in blocks",
    )
    p.add_argument(
        "--workers",
        type=non_negative_int,
        default=_env("WORKERS", "0"),
        help="drive N worker processes over HTTP instead of the in-process library",
    )
    p.add_argument(
        "--num-shards",
        type=non_negative_int,
        default=0,
        help="hash-tag shards of our store's namespace (default 0: 1 on one Redis or the "
        "embedded store, 64 on a cluster)",
    )
    p.add_argument(
        "--lease-ttl-ms",
        type=non_negative_int,
        default=None,
        help="object lease, 0 = none (default 10 s of trace time: 10000 / speedup)",
    )
    p.add_argument("--value-size", type=positive_int, default=4096, help="bytes per object")
    p.add_argument(
        "--batch-size", type=positive_int, default=128, help="keys per call (SGLang: 128)"
    )
    p.add_argument(
        "--sample-every",
        type=non_negative_int,
        default=None,
        help="requests between health samples, 0 = only at the end "
        "(default: 100; demo: 25 samples per run)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the engine routing")
    p.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `replay` on an argparse subparsers object (from add_subparsers())."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="replay a Mooncake FAST'25 trace the way SGLang HiCache drives a store",
        description=(
            "Replay a trace HiCache-style (batch exists, prefix hit, put the missing keys with "
            "their parent block hash, read the hits) and report hit rate, orphans, incomplete "
            "blocks, evictions and latency. Give --target several times to compare side by side."
        ),
    )
    p.add_argument(
        "--trace",
        required=_env("REPLAY_TRACE") is None,
        default=_env("REPLAY_TRACE"),
        metavar="FILE|NAME",
        help="a Mooncake FAST'25 trace (JSONL), or the short name of a bundled slice: "
        + ", ".join(traces.bundled())
        + " (env MOONCAKE_REDIS_REPLAY_TRACE)",
    )
    p.add_argument(
        "--target",
        action="append",
        default=None,
        help=(
            "store to drive: redis (ours), mooncake (the real client against a real master "
            "started on loopback, or --master-address), wire (the real client against our "
            "workers' Mooncake protocol port), model (in-memory reference); repeatable "
            "(default: redis if available, else model)"
        ),
    )
    p.add_argument(
        "--master-address",
        default=_env("REPLAY_MASTER_ADDRESS"),
        metavar="HOST:PORT",
        help="with --target mooncake: drive the master at HOST:PORT instead of starting one",
    )
    p.add_argument(
        "--metadata-url",
        default=None,
        metavar="URL",
        help="with --master-address: the transfer engine's metadata URL "
        "(default http://HOST:8080/metadata)",
    )
    p.add_argument(
        "--master-admin-url",
        default=None,
        metavar="URL",
        help="with --master-address: serves /get_all_keys and /metrics (default http://HOST:9003)",
    )
    p.add_argument(
        "--no-infer-parents",
        action="store_true",
        help="with --target wire: do not infer radix parents from the client's calling order",
    )
    p.add_argument(
        "--capacity-blocks",
        type=positive_int,
        default=_env("REPLAY_CAPACITY_BLOCKS", "10000"),
        help="segments are mounted so that N complete blocks fit",
    )
    p.add_argument(
        "--limit", type=positive_int, default=None, help="replay only the first N requests"
    )
    p.add_argument(
        "--speedup",
        type=positive_float,
        default=None,
        help="follow timestamps at X times real time (default: as fast as possible)",
    )
    _add_store_options(p)
    p.set_defaults(func=run_replay)
    return p


def add_demo_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `demo` on an argparse subparsers object (from add_subparsers())."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="compare radix and batch-evict on a synthetic tiered workload, with a plot",
        description=(
            "Generate a synthetic trace (shared system prompts, multi-turn conversations, deep "
            "chains) served by several engines with host caches, replay it with both policies "
            "at the same capacities, print the comparison and write a PNG plot."
        ),
    )
    p.add_argument(
        "--target",
        default=None,
        help="store to drive: redis (ours) or model (in-memory reference); default redis",
    )
    p.add_argument(
        "--capacities",
        type=positive_int_list,
        default="60,120,240",
        help="comma-separated store capacities in blocks, one run per policy each",
    )
    p.add_argument(
        "--conversations",
        type=positive_int,
        default=14,
        help="synthetic conversations (more: a longer trace)",
    )
    p.add_argument("--plot", default="mooncake-redis-demo.png", help="PNG output path")
    p.add_argument(
        "--limit", type=positive_int, default=None, help="replay only the first N requests"
    )
    p.add_argument(
        "--speedup",
        type=positive_float,
        default=None,
        help="follow timestamps at X times real time (default: as fast as possible)",
    )
    p.add_argument(
        "--details",
        action="store_true",
        help="the full table (every figure, one column per run) instead of the summary",
    )
    _add_store_options(p)
    p.set_defaults(func=run_demo, engines=4, host_cache_blocks=150)
    return p


def register(subparsers: Any) -> None:
    add_replay_parser(subparsers).set_defaults(func=run_replay)
    add_demo_parser(subparsers).set_defaults(func=run_demo)
