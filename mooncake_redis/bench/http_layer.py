"""CPU per call of the HTTP layer: the clients against ``http.client`` and httpx, the worker's
route against a bare ASGI handler. Every figure is one batch-128 ``batch_exist_key``.

    python -m mooncake_redis.bench.http_layer [--redis-url redis://127.0.0.1:6379]
        [--calls 2000] [--sections client,route] [--json]

``client``: one worker process (``serve``) on a fresh namespace with 128 stored keys; each
client sends ``calls`` sequential calls over one kept-alive connection and must find all 128
keys every time (else the bench fails). CPU is this process's (the worker runs in another),
per call, so the ratios compare what each client costs its caller; the worker's own CPU per
call is read from /proc. ``http.client`` is the floor: keep-alive, orjson, nothing else.

``route``: the worker app in this process, called as uvicorn calls it (ASGI scope, receive,
send; the full middleware stack, the metrics), with its service replaced by an object that
answers at once, so that only the route's own cost is measured; beside it a bare ASGI handler
that reads the body, decodes it, encodes the same answer and sends it. Ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..client import AsyncMasterClient, MasterClient
from ..config import Config
from ..server.fleet import WorkerFleet
from ..service import MasterService
from .common import BenchFailure
from .workers import BATCH, _cleanup, check_exists, check_puts

PATH = "/v1/batch_exist_key"


def _proc_cpu(pid: int) -> float:
    """CPU seconds of another process (Linux /proc), or NaN."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _row(name: str, cpu: float, lat: list[float], calls: int, worker_cpu: float) -> dict[str, Any]:
    return {
        "client": name,
        "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
        "p50_ms": round(statistics.median(lat) * 1000, 3),
        "worker_cpu_ms_per_call": round(worker_cpu * 1000 / calls, 3),
    }


def _sync(fn: Callable[[], list[Any]], calls: int, pid: int) -> tuple[float, list[float], float]:
    for _ in range(20):  # warm: connection made, caches filled
        check_exists(fn())
    lat = []
    w0, c0 = _proc_cpu(pid), time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        check_exists(fn())
        lat.append(time.perf_counter() - t0)
    return time.process_time() - c0, lat, _proc_cpu(pid) - w0


async def _async(
    fn: Callable[[], Awaitable[list[Any]]], calls: int, pid: int
) -> tuple[float, list[float], float]:
    for _ in range(20):
        check_exists(await fn())
    lat = []
    w0, c0 = _proc_cpu(pid), time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        check_exists(await fn())
        lat.append(time.perf_counter() - t0)
    return time.process_time() - c0, lat, _proc_cpu(pid) - w0


def _results(data: bytes) -> list[Any]:
    return [item.get("result") for item in orjson.loads(data)["results"]]


def _client_rows(url: str, keys: list[str], calls: int, pid: int) -> list[dict[str, Any]]:
    import httpx

    host, port = url.removeprefix("http://").split(":")
    body = orjson.dumps({"keys": keys})
    headers = {"Content-Type": "application/json"}
    rows = []

    conn = http.client.HTTPConnection(host, int(port))

    def raw() -> list[Any]:
        conn.request("POST", PATH, body, headers)
        return _results(conn.getresponse().read())

    rows.append(_row("http.client keep-alive", *_sync(raw, calls, pid)[:2], calls, 0.0))
    conn.close()
    with MasterClient(url) as ours:
        cpu, lat, wcpu = _sync(lambda: ours.batch_exist_key(keys), calls, pid)
    rows.append(_row("MasterClient", cpu, lat, calls, wcpu))
    with httpx.Client() as hx:
        rows.append(_row("httpx.Client", *_sync(
            lambda: _results(hx.post(url + PATH, content=body, headers=headers).content),
            calls, pid)[:2], calls, 0.0))  # fmt: skip

    async def async_rows() -> list[dict[str, Any]]:
        out = []
        async with AsyncMasterClient(url) as c:
            out.append(_row("AsyncMasterClient", *(await _async(
                lambda: c.batch_exist_key(keys), calls, pid))[:2], calls, 0.0))  # fmt: skip
        async with httpx.AsyncClient() as hx:

            async def call() -> list[Any]:
                return _results((await hx.post(url + PATH, content=body, headers=headers)).content)

            out.append(_row("httpx.AsyncClient", *(await _async(call, calls, pid))[:2], calls, 0))
        return out

    rows += asyncio.run(async_rows())
    try:
        import uvloop
    except ImportError:
        return rows

    async def on_uvloop() -> dict[str, Any]:
        async with AsyncMasterClient(url) as c:
            cpu, lat, _ = await _async(lambda: c.batch_exist_key(keys), calls, pid)
        return _row("AsyncMasterClient on uvloop", cpu, lat, calls, 0.0)

    rows.append(uvloop.run(on_uvloop()))
    return rows


def _pinger(url: str, stop: threading.Event) -> threading.Thread:
    """Pings every second from a thread: the sync runs block this thread's event loop, and a
    client silent for client_live_ttl_ms loses its segment and objects."""

    def run() -> None:
        with MasterClient(url) as c:
            while not stop.wait(1.0):
                c.ping("bench")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def client_section(redis_url: str, calls: int) -> list[dict[str, Any]]:
    namespace = "benchhttp" + uuid.uuid4().hex[:8]
    cfg = Config(redis_url=redis_url, namespace=namespace, enable_radix_tree=True)
    keys = [f"bench-{i}" for i in range(BATCH)]

    async def with_service(fn: Callable[[MasterService], Awaitable[None]]) -> None:
        service = await MasterService.from_url(redis_url, cfg)
        try:
            await fn(service)
        finally:
            await service.aclose()

    async def setup(service: MasterService) -> None:
        await service.mount_segment({"id": "bench", "size": 1 << 40}, "bench")
        await service.ping("bench")
        check_puts(await service.batch_put_start("bench", keys, [4096] * BATCH))
        if any(e is not None for e in await service.batch_put_end("bench", keys)):
            raise BenchFailure("batch_put_end failed")

    fleet = WorkerFleet(redis_url, namespace, cfg.num_shards, 1, worker_args=["--evictor", "off"])
    asyncio.run(fleet.start_all())
    stop = threading.Event()
    try:
        asyncio.run(with_service(setup))
        pinger = _pinger(fleet.urls[0], stop)
        proc = fleet.workers[0]
        assert proc is not None
        rows = _client_rows(fleet.urls[0], keys, calls, proc.pid)
        stop.set()
        pinger.join()
    finally:
        stop.set()
        fleet.stop_all()
        asyncio.run(with_service(_cleanup))
    base = rows[0]["cpu_ms_per_call"]
    for r in rows:
        r["cpu_vs_http_client"] = round(r["cpu_ms_per_call"] / base, 2) if base else 0.0
    return rows


# -- the route --------------------------------------------------------------------------------


class _Answering:
    """Answers batch_exist_key at once: the route's cost without the store's."""

    async def batch_exist_key(self, keys: list[str]) -> list[bool]:
        return [True] * len(keys)


async def _bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
    message = await receive()
    keys = orjson.loads(message["body"])["keys"]
    payload = orjson.dumps({"results": [{"result": True} for _ in keys]})
    length = str(len(payload)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", length)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _drive(app: Any, body: bytes, calls: int) -> float:
    sent: list[Any] = []
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": PATH, "raw_path": PATH.encode(), "root_path": "",
             "query_string": b"", "headers": [(b"host", b"w"), (b"content-type",
             b"application/json"), (b"content-length", str(len(body)).encode())],
             "server": ("127.0.0.1", 1), "client": ("127.0.0.1", 2)}  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for _ in range(50):
        await app(dict(scope), receive, send)
    sent.clear()
    start = time.process_time()
    for _ in range(calls):
        await app(dict(scope), receive, send)
    cpu = time.process_time() - start
    # every call checked, after the clock: (start, body) messages per call
    for head, answer in zip(sent[0::2], sent[1::2], strict=True):
        if head["status"] != 200 or len(_results(answer["body"])) != BATCH:
            raise BenchFailure(f"route answered {head['status']}: {answer['body'][:200]!r}")
    if len(sent) != 2 * calls:
        raise BenchFailure(f"route: {len(sent) // 2} answers for {calls} calls")
    return cpu


def route_section(calls: int) -> list[dict[str, Any]]:
    from ..server.app import ServerSettings, create_app

    body = orjson.dumps({"keys": [f"{i:064x}_0" for i in range(BATCH)]})
    app = create_app(ServerSettings(fsck_interval_s=0, evictor="off"))
    app.state.worker.service = _Answering()
    bare = asyncio.run(_drive(_bare, body, calls))
    route = asyncio.run(_drive(app, body, calls))
    return [
        {"handler": "bare ASGI handler", "cpu_ms_per_call": round(bare * 1000 / calls, 4)},
        {"handler": "worker route", "cpu_ms_per_call": round(route * 1000 / calls, 4),
         "vs_bare": round(route / bare, 2)},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mooncake_redis.bench.http_layer")
    p.add_argument("--redis-url", default=os.environ.get("MOONCAKE_REDIS_REDIS_URL",
                                                         "redis://127.0.0.1:6379"))  # fmt: skip
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--sections", default="client,route")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sections = set(args.sections.split(","))
    out: dict[str, Any] = {"calls": args.calls, "batch": BATCH, "cpus": os.cpu_count()}
    if "route" in sections:
        out["route"] = route_section(args.calls * 5)
    if "client" in sections:
        out["client"] = client_section(args.redis_url, args.calls)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"batch_exist_key of {BATCH} keys, {args.calls} calls, {out['cpus']} CPUs")
    for r in out.get("route", []):
        print(f"  route  {r['handler']:<28} {r['cpu_ms_per_call']:>8.4f} ms CPU/call"
              + (f"  x{r['vs_bare']} of bare" if "vs_bare" in r else ""))  # fmt: skip
    for r in out.get("client", []):
        worker = (f", worker {r['worker_cpu_ms_per_call']:.3f} ms CPU/call"
                  if r["worker_cpu_ms_per_call"] else "")  # fmt: skip
        ratio = f"x{r['cpu_vs_http_client']} of http.client"
        print(f"  client {r['client']:<28} {r['cpu_ms_per_call']:>8.3f} ms CPU/call ({ratio}), "
              f"p50 {r['p50_ms']:.3f} ms{worker}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
