"""``mooncake-redis evictor``: a dedicated evictor (and janitor) process, or one pass now; its
help is DESCRIPTION below. Also mounts ``bench-eviction`` (see :mod:`.bench_eviction`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
from typing import Any

from ..eviction.metrics import EvictionResult
from .common import positive_int, scoring
from .options import add_config_args, config_from_args

DESCRIPTION = """Run the eviction coordinator and janitor, or one eviction pass now.

Without --once the process competes for the evictor lease with every worker running
`serve --evictor auto` and, while it holds it, evicts whenever the high watermark (or a failed
allocation) asks for it and runs the janitor. Ctrl-C or SIGTERM stops it and releases the lease.
--once runs one full pass now and prints what it evicted (exit 3 when another evictor holds the
lease)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "evictor",
        help="run the evictor and janitor (lease-coordinated), or one eviction pass (--once)",
        description=DESCRIPTION,
    )
    add_config_args(p)
    p.add_argument("--once", action="store_true", help="one full eviction pass now, then exit")
    p.add_argument("--json", action="store_true", help="JSON output (one line per pass)")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --once: evict even below the watermark (as after a failed allocation)",
    )
    p.add_argument("--max-objects", type=positive_int, help="with --once: evict this many objects")
    p.add_argument(
        "--policy",
        type=scoring,
        help=(
            "leaf scoring: tiered[:F/X/Y[/G]], lru or lru-freq[:W] "
            "(default: env MOONCAKE_REDIS_EVICTION_POLICY, else tiered)"
        ),
    )
    p.add_argument(
        "--check-interval-ms", type=positive_int, default=20, help="watermark check period"
    )
    p.add_argument("--no-janitor", action="store_true", help="evict only, leave the janitor")
    p.set_defaults(func=run_evictor)
    from .bench_eviction import register as register_bench

    register_bench(subparsers)


def _line(r: EvictionResult) -> str:
    return (
        f"{r.mode} pass ({r.reason}, {r.policy or '-'}, epoch {r.epoch}): evicted "
        f"{r.evicted_objects} objects / {r.bytes} bytes in {r.evicted_leaves} leaves, "
        f"cascade depth {r.cascade_depth}, {r.rounds} rounds, {r.batches} batches, "
        f"used {r.used_before:.3f} -> {r.used_after:.3f}, {r.seconds * 1000:.1f} ms"
        + (f" (lease held by {r.holder})" if r.reason == "lease_held" else "")
    )


def _print(r: EvictionResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps(r.to_dict(with_keys=False)), flush=True)
    else:
        print(_line(r), flush=True)


async def _main(args: argparse.Namespace) -> int:
    from ..service import MasterService

    cfg = config_from_args(args)
    if args.policy:
        cfg = cfg.replace(eviction_policy=args.policy)
    svc = await MasterService.from_url(cfg.redis_url, cfg)
    svc.hears_clients = False  # no client pings this process: its ticks show nothing heard
    try:
        if args.once:
            r = await svc.evict_once(force=args.force, max_objects=args.max_objects)
            _print(r, args.json)
            return 0 if r.reason != "lease_held" else 3
        svc.eviction_metrics.add_listener(
            lambda r: _print(r, args.json) if r.evicted_objects or r.evicted_leaves else None
        )
        coord = svc.eviction_coordinator(
            check_interval_ms=args.check_interval_ms, janitor=not args.no_janitor
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        coord.start()
        await stop.wait()
        await coord.stop()
        return 0
    finally:
        await svc.aclose()


def run_evictor(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return asyncio.run(_main(args))
