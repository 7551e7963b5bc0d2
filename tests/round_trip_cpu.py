"""This process's CPU per Redis round trip: the backend's redis-py client against a bare asyncio
protocol with hiredis, on the stdlib loop and on uvloop.

``python3 tests/round_trip_cpu.py <port> [calls]`` sends ``calls`` (5,000) ``EVALSHA`` of a
``return 1`` script with 10 arguments, one at a time, on each path, and prints the microseconds
of this process's CPU (``time.process_time``) and of wall time per call, in two rounds. The
bare protocol is what a lean client for the hot path could cost: one write, one parse, one
future per call, no pool, retry or timeout layers. Not a test: a measuring tool behind
docs/benchmarks.md ("the per-call costs behind the whole trace").
"""

from __future__ import annotations

import asyncio
import collections
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import hiredis
import uvloop

from mooncake_redis.backend import Backend

ARGS = [str(i) for i in range(10)]


async def _timed(call: Callable[..., Awaitable[Any]], sha: str, calls: int) -> tuple[float, float]:
    """(CPU, wall) microseconds per call of ``call("EVALSHA", ...)``, after a warm-up."""
    for _ in range(200):
        await call("EVALSHA", sha, 1, "{x}:a", *ARGS)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        assert await call("EVALSHA", sha, 1, "{x}:a", *ARGS) == 1
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


async def redis_py(port: int, calls: int) -> tuple[float, float]:
    backend = Backend.from_url(f"redis://127.0.0.1:{port}")
    client = backend.client
    out = await _timed(client.execute_command, await client.script_load("return 1"), calls)
    await backend.aclose()
    return out


class _Bare(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.waiting.popleft().set_result(reply)

    def call(self, *args: Any) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        self.transport.write(hiredis.pack_command(args))
        return fut


async def bare(port: int, calls: int) -> tuple[float, float]:
    transport, proto = await asyncio.get_running_loop().create_connection(_Bare, "127.0.0.1", port)
    out = await _timed(proto.call, await proto.call("SCRIPT", "LOAD", "return 1"), calls)
    transport.close()
    return out


def main() -> None:
    port = int(sys.argv[1])
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    for rnd in (1, 2):
        for name, run in (("asyncio", asyncio.run), ("uvloop", uvloop.run)):
            for path, fn in (("redis-py", redis_py), ("bare protocol", bare)):
                cpu, wall = run(fn(port, calls))
                print(f"round {rnd} {name:8s} {path:14s} cpu {cpu:6.1f} us  wall {wall:6.1f} us")


if __name__ == "__main__":
    main()
