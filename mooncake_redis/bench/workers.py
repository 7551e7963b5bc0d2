"""Throughput of batch-128 ``batch_exist_key`` and ``batch_put_start`` in process, through one
worker and through three (same run), and the cost of the HTTP hop.

    python -m mooncake_redis.bench.workers [--redis-url redis://127.0.0.1:6379] [--seconds 3]
        [--concurrency 16] [--json]

Starts three ``serve`` processes on loopback ports against a fresh namespace, mounts one large
segment (allocation metadata only: no bytes move), and for each target runs ``concurrency``
asyncio lanes, each sending batch calls back to back for ``seconds``. The in-process figures use
``MasterService`` directly in this process; the HTTP figures use :class:`AsyncMasterClient`
(round-robin over the workers). The bench's client pings every second for the whole run (a
silent client loses its segment and objects after ``client_live_ttl_ms``), and every call is
checked: each exists must find all its 128 stored keys, each put must allocate all 128; one
failure stops the bench with an error, so a figure is never taken over failing calls.
Everything runs on one machine: the client, the workers and Redis share its cores, so the
three-worker figure is bounded by them. The namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..client import AsyncMasterClient
from ..config import Config
from ..errors import MooncakeError
from ..server.fleet import WorkerFleet
from ..service import MasterService
from .common import BenchFailure as BenchFailure  # re-exported: tests and http_layer name it here

BATCH = 128
OBJ_SIZE = 4096


@dataclass
class Figure:
    target: str  # "library" | "1 worker" | "3 workers"
    rpc: str
    concurrency: int
    calls: int
    seconds: float
    calls_per_s: float
    keys_per_s: float
    p50_ms: float
    p99_ms: float


async def _measure(
    target: str,
    rpc: str,
    concurrency: int,
    seconds: float,
    call: Callable[[int, int], Awaitable[Any]],
) -> Figure:
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def lane(lane_id: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await call(lane_id, n)
            lat.append(time.perf_counter() - t0)
            n += 1

    start = time.perf_counter()
    await asyncio.gather(*(lane(i) for i in range(concurrency)))
    took = time.perf_counter() - start
    lat.sort()
    calls = len(lat)
    return Figure(
        target,
        rpc,
        concurrency,
        calls,
        round(took, 2),
        round(calls / took, 1),
        round(calls * BATCH / took, 0),
        round(statistics.median(lat) * 1000, 2) if lat else 0.0,
        round(lat[int(0.99 * (calls - 1))] * 1000, 2) if lat else 0.0,
    )


Call = Callable[[int, int], Awaitable[Any]]


def check_exists(found: list[bool | MooncakeError]) -> None:
    bad = [r for r in found if r is not True]
    if len(found) != BATCH or bad:
        raise BenchFailure(f"batch_exist_key: {len(found)} answers for {BATCH} stored keys, "
                           f"{len(bad)} not found {bad[:1]!r}")  # fmt: skip


def check_puts(res: list[Any]) -> None:
    bad = [r for r in res if not isinstance(r, list) or not r]
    if len(res) != BATCH or bad:
        raise BenchFailure(f"batch_put_start: {len(res)} answers for {BATCH} keys, "
                           f"{len(bad)} failed {bad[:1]!r}")  # fmt: skip


def _calls(
    impl: MasterService | list[AsyncMasterClient],
    exist_keys: Callable[[int, int], list[str]],
    put_keys: Callable[[str, int, int], list[str]],
    sizes: list[int],
) -> tuple[Call, Callable[[str], Call]]:
    """The two measured calls on one target (the library, or clients round-robin)."""
    if isinstance(impl, MasterService):
        svc = impl

        async def exist(lane_id: int, n: int) -> Any:
            check_exists(await svc.batch_exist_key(exist_keys(lane_id, n)))

        def put_for(tag: str) -> Call:
            async def put(lane_id: int, n: int) -> Any:
                check_puts(await svc.batch_put_start("bench", put_keys(tag, lane_id, n), sizes))

            return put

        return exist, put_for
    clients = impl

    async def exist_http(lane_id: int, n: int) -> Any:
        c = clients[(lane_id + n) % len(clients)]
        check_exists(await c.batch_exist_key(exist_keys(lane_id, n)))

    def put_for_http(tag: str) -> Call:
        async def put(lane_id: int, n: int) -> Any:
            c = clients[(lane_id + n) % len(clients)]
            check_puts(await c.batch_put_start("bench", put_keys(tag, lane_id, n), sizes))

        return put

    return exist_http, put_for_http


async def keep_pinging(service: MasterService, client_id: str, every_s: float = 1.0) -> None:
    """A Mooncake client pings; one that stops loses its segments and their objects."""
    while True:
        await service.ping(client_id)
        await asyncio.sleep(every_s)


async def _cleanup(service: MasterService) -> None:
    client = service.backend.client
    pattern = "{" + service.config.namespace + ":*"
    if service.backend.cluster:
        for node in client.get_primaries():
            conn = client.get_redis_connection(node)
            async for key in conn.scan_iter(match=pattern, count=1000):
                await conn.delete(key)
    else:
        async for key in client.scan_iter(match=pattern, count=1000):
            await client.delete(key)


async def run_bench(
    redis_url: str = "redis://127.0.0.1:6379",
    seconds: float = 3.0,
    concurrency: int = 16,
    num_shards: int = 0,
) -> dict[str, Any]:
    """Runs every measurement; returns the figures and the HTTP overheads."""
    namespace = "bench" + uuid.uuid4().hex[:8]
    cfg = Config(
        redis_url=redis_url, namespace=namespace, num_shards=num_shards, enable_radix_tree=True
    )
    service = await MasterService.from_url(redis_url, cfg)
    fleet = WorkerFleet(redis_url, namespace, num_shards, 3, worker_args=["--evictor", "off"])
    await fleet.start_all()
    urls = fleet.urls
    one = AsyncMasterClient(urls[0], max_connections=concurrency * 2)
    three = [AsyncMasterClient(u, max_connections=concurrency * 2) for u in urls]
    figures: list[Figure] = []
    pinger = asyncio.create_task(keep_pinging(service, "bench"))
    try:
        await service.mount_segment({"id": "bench", "size": 1 << 50}, "bench")
        # Present keys for the exists calls: 4096 COMPLETE objects.
        present = [f"bench-{i}" for i in range(4096)]
        for i in range(0, len(present), BATCH):
            part = present[i : i + BATCH]
            check_puts(await service.batch_put_start("bench", part, [OBJ_SIZE] * len(part)))
            ends = await service.batch_put_end("bench", part)
            if any(e is not None for e in ends):
                raise BenchFailure(f"batch_put_end: {[e for e in ends if e is not None][:1]}")

        def exist_keys(lane_id: int, n: int) -> list[str]:
            start = ((lane_id * 7919 + n) * BATCH) % (len(present) - BATCH)
            return present[start : start + BATCH]

        def put_keys(tag: str, lane_id: int, n: int) -> list[str]:
            return [f"{tag}-{lane_id}-{n}-{j}" for j in range(BATCH)]

        sizes = [OBJ_SIZE] * BATCH
        targets: list[tuple[str, MasterService | list[AsyncMasterClient]]] = [
            ("library", service),
            ("1 worker", [one]),
            ("3 workers", three),
        ]
        for conc in (1, concurrency):
            for target, impl in targets:
                exist, put_for = _calls(impl, exist_keys, put_keys, sizes)
                figures.append(await _measure(target, "batch_exist_key", conc, seconds, exist))
                tag = f"p{conc}{target[0]}"
                figures.append(
                    await _measure(target, "batch_put_start", conc, seconds, put_for(tag))
                )
    finally:
        pinger.cancel()
        await one.aclose()
        for c in three:
            await c.aclose()
        fleet.stop_all()
        await _cleanup(service)
        await service.aclose()
    overhead: list[dict[str, Any]] = []
    for rpc in ("batch_exist_key", "batch_put_start"):
        for conc in (1, concurrency):
            lib = next(
                f for f in figures if (f.target, f.rpc, f.concurrency) == ("library", rpc, conc)
            )
            http = next(
                f for f in figures if (f.target, f.rpc, f.concurrency) == ("1 worker", rpc, conc)
            )
            overhead.append(
                {
                    "rpc": rpc,
                    "concurrency": conc,
                    "library_p50_ms": lib.p50_ms,
                    "http_p50_ms": http.p50_ms,
                    "added_ms_per_call": round(http.p50_ms - lib.p50_ms, 2),
                    "throughput_ratio": round(http.calls_per_s / lib.calls_per_s, 2)
                    if lib.calls_per_s
                    else 0.0,
                }
            )
    return {
        "batch": BATCH,
        "object_size": OBJ_SIZE,
        "cpus": os.cpu_count(),
        "figures": [asdict(f) for f in figures],
        "http_overhead": overhead,
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"batch {result['batch']}, {result['cpus']} CPUs (client, workers and Redis share them)")
    print(f"{'target':<10} {'rpc':<16} {'conc':>4} {'calls/s':>9} {'keys/s':>10} "
          f"{'p50 ms':>8} {'p99 ms':>8}")  # fmt: skip
    for f in result["figures"]:
        print(f"{f['target']:<10} {f['rpc']:<16} {f['concurrency']:>4} {f['calls_per_s']:>9.1f} "
              f"{f['keys_per_s']:>10.0f} {f['p50_ms']:>8.2f} {f['p99_ms']:>8.2f}")  # fmt: skip
    print("HTTP hop (1 worker vs library):")
    for o in result["http_overhead"]:
        print(f"  {o['rpc']:<16} conc {o['concurrency']:>3}: +{o['added_ms_per_call']:.2f} ms "
              f"per call at p50, throughput x{o['throughput_ratio']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mooncake_redis.bench.workers", description=__doc__)
    p.add_argument(
        "--redis-url",
        default=os.environ.get("MOONCAKE_REDIS_REDIS_URL", "redis://127.0.0.1:6379"),
    )
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--num-shards", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = asyncio.run(run_bench(args.redis_url, args.seconds, args.concurrency, args.num_shards))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
