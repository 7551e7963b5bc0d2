"""Running ``replay`` and ``demo``: options from the parsed arguments, the targets, the runs and
their reports; each returns the process exit code."""

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

from mooncake_redis.cli.common import (
    describe_store,
    env_redis_url,
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
from mooncake_redis.replay.trace import TraceError, TraceRecord, load_trace

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
    if getattr(args, "num_shards", 0):
        extra["num_shards"] = str(args.num_shards)
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
