"""Subcommands `replay` and `demo`, for the top-level `mooncake-redis` CLI to mount.

The top-level CLI owns the program; it calls add_replay_parser / add_demo_parser on its
subparsers and dispatches to run_replay / run_demo, which return the process exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from mooncake_redis.cli_common import (
    add_redis_url,
    describe_store,
    env_redis_url,
    non_negative_int,
    positive_float,
    positive_int,
    positive_int_list,
)
from mooncake_redis.errors import MooncakeError
from mooncake_redis.replay import traces
from mooncake_redis.replay.driver import ReplayOptions, ReplayResult, replay
from mooncake_redis.replay.report import (
    plot_capacity,
    print_comparison,
    print_results,
    print_summary,
    results_json,
)
from mooncake_redis.replay.synth import SynthConfig, generate
from mooncake_redis.replay.target import (
    TargetOptions,
    available_targets,
    create_target,
)
from mooncake_redis.replay.trace import KEY_FORMATS, TraceError, TraceRecord, load_trace

ENV = "MOONCAKE_REDIS_"
POLICIES = ("radix", "batch-evict")
DEFAULT_LEASE_MS = 10_000


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV + name, default)


def default_target() -> str:
    """Our own store when its target is registered, else the in-memory reference model."""
    explicit = _env("REPLAY_TARGET")
    if explicit:
        return explicit
    return "redis" if "redis" in available_targets() else "model"


def leaf_policy(text: str) -> str:
    """A leaf policy of the store (``lru``, ``lru-freq:W``) or of the model's policy study."""
    from mooncake_redis.eviction.policy import get_policy
    from mooncake_redis.replay.policies import make_policy, policy_names

    try:
        get_policy(text)
        return text
    except MooncakeError as store_exc:
        try:
            make_policy(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{store_exc}; the model (--target model) also has {', '.join(policy_names())}"
            ) from None
    return text


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
        default=_env("EVICTION_POLICY", "lru"),
        help=(
            "radix leaf policy: lru or lru-freq[:W] on our store; on the model also every "
            "candidate of the policy study, e.g. arc, s3fifo, 2q, lru-refs (default lru)"
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


def _lease_ms(args: argparse.Namespace) -> int:
    if args.lease_ttl_ms is not None:
        return int(args.lease_ttl_ms)
    return int(DEFAULT_LEASE_MS / args.speedup) if args.speedup else DEFAULT_LEASE_MS


def _extra(args: argparse.Namespace) -> dict[str, str]:
    extra: dict[str, str] = {}
    if getattr(args, "master_address", None):
        extra["master_address"] = args.master_address
        if args.metadata_url:
            extra["metadata_url"] = args.metadata_url
        if args.master_admin_url:
            extra["admin_url"] = args.master_admin_url
    if getattr(args, "no_infer_parents", False):
        extra["infer_parents"] = "0"
    return extra


def _options(
    args: argparse.Namespace,
    capacity: int,
    policy: str,
    label: str,
    target: str = "redis",
    scoring: str | None = None,
) -> tuple[TargetOptions, ReplayOptions]:
    per_block = 1 if args.key_format == "mla" else 2 * args.tp
    url = getattr(args, "redis_url", None) or env_redis_url()
    scoring = scoring or args.scoring
    topts = TargetOptions(
        capacity_blocks=capacity,
        objects_per_block=per_block,
        value_size=args.value_size,
        policy=policy,
        scoring=scoring,
        redis_url=url,
        workers=args.workers,
        lease_ttl_ms=_lease_ms(args),
        extra=_extra(args),
    )
    params: dict[str, Any] = {
        "store": store_name(target, url, args.workers, getattr(args, "master_address", None)),
        "policy": policy,
        "scoring": scoring if policy == "radix" else "-",
        "capacity_blocks": capacity,
        "keys": args.key_format if args.key_format == "mla" else f"mha tp{args.tp}",
    }
    if args.engines:
        params["engines x host blocks"] = f"{args.engines} x {args.host_cache_blocks}"
    if args.speedup:
        params["speedup"] = args.speedup
    ropts = ReplayOptions(
        key_format=args.key_format,
        tp=args.tp,
        batch_size=args.batch_size,
        engines=args.engines,
        host_cache_blocks=args.host_cache_blocks,
        limit=args.limit,
        speedup=args.speedup,
        sample_every=100 if args.sample_every is None else args.sample_every,
        seed=args.seed,
        progress=not (args.no_progress or args.json),
        label=label,
        params=params,
    )
    return topts, ropts


async def run_one(
    name: str, records: Sequence[TraceRecord], topts: TargetOptions, ropts: ReplayOptions
) -> ReplayResult:
    """Create the target, replay, and always close it (a real master must not outlive us)."""
    target = await create_target(name, topts)
    try:
        result = await replay(records, target, ropts)
    finally:
        await target.close()
    result.params["value bytes"] = target.value_size
    return result


def store_name(
    target: str, url: str | None, workers: int = 0, master_address: str | None = None
) -> str:
    """What a report calls the store a run drives."""
    if target == "mooncake":
        return (
            f"the master at {master_address}"
            if master_address
            else ("a real mooncake_master on loopback")
        )
    if target == "model":
        return "the in-memory reference model"
    where = describe_store(url)
    if target == "wire":
        return f"{max(workers, 1)} workers' Mooncake port on {where}"
    return f"{workers} workers over HTTP on {where}" if workers else where


def _fail(message: str) -> int:
    Console(stderr=True).print(
        f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True
    )
    return 2


async def _run_all(
    jobs: list[tuple[str, TargetOptions, ReplayOptions]], records: Sequence[TraceRecord]
) -> list[ReplayResult]:
    return [await run_one(name, records, t, r) for name, t, r in jobs]


def _run(
    jobs: list[tuple[str, TargetOptions, ReplayOptions]], records: Sequence[TraceRecord]
) -> list[ReplayResult] | int:
    from mooncake_redis.replay.mooncake_target import MooncakeUnavailable

    try:
        return asyncio.run(_run_all(jobs, records))
    except (MooncakeUnavailable, LookupError, ValueError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130


def run_replay(args: argparse.Namespace) -> int:
    """Entry point of `mooncake-redis replay`; returns the exit code."""
    try:
        records = load_trace(traces.resolve(args.trace), args.limit)
    except FileNotFoundError as exc:
        bundled = ", ".join(traces.bundled())
        return _fail(f"{exc}; bundled traces, by name: {bundled} (README.md, 'Traces')")
    except (OSError, TraceError) as exc:
        return _fail(str(exc))
    if not records:
        return _fail(f"{args.trace}: no requests")
    names = args.target or [default_target()]
    compare = [c.strip() for c in (args.compare or "").split(",") if c.strip()]
    if args.compare is not None and not compare:
        return _fail("--compare needs at least one policy name, e.g. --compare lru,arc")
    for name in compare:
        try:
            leaf_policy(name)
        except argparse.ArgumentTypeError as exc:
            return _fail(f"--compare: {exc}")
    jobs = []
    for name in names:
        for scoring in [None] if name in ("mooncake", "wire") or not compare else compare:
            label = name if scoring is None else f"{name} {scoring}"
            topts, ropts = _options(
                args, args.capacity_blocks, args.policy, label, target=name, scoring=scoring
            )
            if name == "mooncake":
                policy = (
                    f"as configured at {args.master_address}"
                    if args.master_address
                    else "batch-evict (mooncake)"
                )
                params = {**ropts.params, "policy": policy, "scoring": "-"}
                ropts = replace(ropts, params=params)
            jobs.append((name, topts, ropts))
    results = _run(jobs, records)
    if isinstance(results, int):
        return results
    if args.json:
        print(results_json(results))
    elif compare:
        print_comparison(results, title=f"replay of {args.trace}")
    else:
        stores = sorted({r.params.get("store", "") for r in results} - {""})
        print_results(results, title=f"replay of {args.trace} on {'; '.join(stores)}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    """Entry point of `mooncake-redis demo`; returns the exit code."""
    capacities: list[int] = args.capacities
    records = generate(SynthConfig(seed=args.seed, conversations=args.conversations))
    if args.sample_every is None:  # a short trace: enough samples for a mean and a max
        args.sample_every = max(1, len(records) // 25)
    name = args.target or default_target()
    if name == "model" and not args.json:
        Console(stderr=True).print(
            "[yellow]note:[/] our store's replay target is not registered yet; "
            "running the in-memory reference model (register_target('redis', ...)).",
            highlight=False,
        )
    jobs = []
    for capacity in capacities:
        for policy in POLICIES:
            topts, ropts = _options(args, capacity, policy, f"{policy} @{capacity}", target=name)
            jobs.append((name, topts, ropts))
    results = _run(jobs, records)
    if isinstance(results, int):
        return results
    refs = sum(len(r.hash_ids) for r in records[: args.limit])
    keys = "MLA keys" if args.key_format == "mla" else f"MHA keys, TP {args.tp}"
    what = [
        f"synthetic trace: {results[0].requests:,} requests, {refs:,} block references",
        f"{args.engines} engines x {args.host_cache_blocks} host-cache blocks, {keys}",
    ]
    store = results[0].params.get("store", name)
    plot_title = f"demo: radix vs batch-evict on the {store}\n" + "; ".join(what)
    path = plot_capacity(results, Path(args.plot), title=plot_title)
    if args.json:
        print(results_json(results))
    else:
        title = "\n".join([f"demo: radix vs batch-evict on the {store}", *what])
        if args.details:
            print_results(results, title=title)
        else:
            print_summary(results, title=title)
        print(f"plot written to {path}", file=sys.stdout)
    return 0
