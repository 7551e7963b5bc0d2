"""``mooncake-redis chaos``: the chaos run of :mod:`..testing.chaos` from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ..testing.chaos import ChaosOptions, ChaosReport, _drop_namespace, _memory_of, run_chaos
from .common import (
    add_redis_url,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)

DESCRIPTION = """Kill and restart worker processes and the evictor under load, then count.

Starts --workers worker processes and one evictor process against the Redis of --redis-url (a
fresh namespace, removed afterwards unless --keep), runs --lanes client lanes of mixed puts,
reads, removes and registrations with memory pressure for --duration seconds, SIGKILLs a random
process about every --kill-every seconds and restarts it; then recovers (janitor, evictor
journal, fsck repair) and reports operations, kills, invariant violations and lost objects.
With --outages / --oom-phases it runs its own redis-server (AOF on) and takes it down (SIGKILL,
restart from AOF) or fills it to maxmemory, each for longer than the client ttl, between kills.
Exit 0 only when there were no violations, no losses, no unexpected errors and both segments
are still mounted. Needs a Redis server (loopback): the processes share the store."""


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "chaos",
        help="kill and restart workers and the evictor under load; count violations and losses",
        description=DESCRIPTION,
    )
    d = ChaosOptions()
    add_redis_url(
        p,
        help="redis:// or redis+cluster:// on loopback (env MOONCAKE_REDIS_REDIS_URL); a fresh "
        "namespace is used and removed",
    )
    p.add_argument("--duration", type=positive_float, default=d.duration_s, help="seconds of load")
    p.add_argument("--workers", type=positive_int, default=d.workers, help="worker processes")
    p.add_argument("--lanes", type=positive_int, default=d.lanes, help="concurrent client lanes")
    p.add_argument(
        "--kill-every",
        type=non_negative_float,
        default=d.kill_every_s,
        help="mean seconds between kills (0: none)",
    )
    p.add_argument(
        "--capacity-objects",
        type=positive_int,
        default=d.capacity_objects,
        help="objects both segments hold together (memory pressure for the evictor)",
    )
    p.add_argument(
        "--outages",
        type=non_negative_int,
        default=0,
        help="Redis outages (runs its own redis-server: SIGKILL, restart from AOF)",
    )
    p.add_argument(
        "--oom-phases",
        type=non_negative_int,
        default=0,
        help="spells at maxmemory (its own redis-server)",
    )
    p.add_argument(
        "--phase-seconds",
        type=non_negative_float,
        default=0.0,
        help="length of a phase (0: 2.5 client ttls)",
    )
    p.add_argument(
        "--client-ttl-ms",
        type=non_negative_int,
        default=0,
        help="client_live_ttl_ms of the workers (0: 600000, or 2000 with phases)",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the load and the kills")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--keep", action="store_true", help="keep the namespace's keys afterwards")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..errors import ErrorCode, MooncakeError
    from .common import describe_store, redis_url

    url = redis_url(args.redis_url)
    private = bool(args.outages or args.oom_phases)  # the run starts a redis-server of its own
    if url.startswith("fakeredis") and not private:
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS,
            "chaos needs a Redis server that its worker processes share (the embedded store "
            "lives in one process): give --redis-url redis://127.0.0.1:6379 or set "
            "MOONCAKE_REDIS_REDIS_URL",
        )
    console = Console(stderr=True)
    opts = ChaosOptions(
        redis_url=url,
        duration_s=args.duration,
        workers=args.workers,
        lanes=args.lanes,
        kill_every_s=args.kill_every,
        capacity_objects=args.capacity_objects,
        seed=args.seed,
        outages=args.outages,
        oom_phases=args.oom_phases,
        phase_s=args.phase_seconds,
        client_live_ttl_ms=args.client_ttl_ms,
    )

    async def go() -> ChaosReport:
        try:
            rep = await run_chaos(opts, progress=lambda m: console.print(f"[dim]{escape(m)}[/dim]"))
        finally:
            if not args.keep and not opts.private:  # a private Redis is gone already
                await _drop_namespace(opts.redis_url, opts.namespace)
        if not args.keep and not opts.private:
            rep.redis_used_memory["after_drop"] = await _memory_of(opts.redis_url)
        return rep

    rep = asyncio.run(go())
    d = rep.to_dict()
    where = f"chaos: {describe_store(opts.redis_url)} namespace {opts.namespace}"
    table = Table(title=escape(where))
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("seconds", rep.seconds),
        ("operations", d["total_ops"]),
        ("kills (worker / evictor)", f"{rep.kills.get('worker', 0)} / "
                                     f"{rep.kills.get('evictor', 0)}"),
        ("restarts", rep.restarts),
        ("errors", d["total_errors"]),
        ("calls cut by a kill (not resent)", rep.interrupted_by_kills),
        ("Redis phases (outage / OOM, seconds each)",
         ", ".join(f"{p['kind']} {p['seconds']}" for p in rep.phases) or "-"),
        ("calls refused by a phase", rep.refused_in_phases),
        ("segments still mounted (of 2)", rep.segments_mounted),
        ("acknowledged COMPLETE objects", rep.acked_complete),
        ("removed by the load (+ cut by a kill)", f"{rep.removed} (+{rep.removes_cut_by_kills})"),
        ("gone otherwise / evicted (counter)", f"{rep.disappeared} / {rep.evicted_total}"),
        ("lost objects", rep.lost_objects),
        ("allowed states before repair", rep.allowed_before_repair),
        ("invariant violations", d["violation_count"]),
        ("p99 ms per window", rep.p99_ms_by_window),
        ("Redis used_memory before / after / after drop",
         f"{rep.redis_used_memory.get('before')} / {rep.redis_used_memory.get('after')} / "
         f"{rep.redis_used_memory.get('after_drop', '-')}"),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, escape(str(value)))
    Console().print(table)
    for v in rep.violations_before_repair + rep.violations:
        console.print(f"[red]violation[/red] {escape(v)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(d, f, indent=2)
    bad = d["violation_count"] or rep.lost_objects or d["total_errors"] or rep.segments_mounted < 2
    return 1 if bad else 0
