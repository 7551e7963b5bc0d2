"""The coro_rpc listener: an asyncio server in each worker, beside HTTP, on one port that
several workers share (SO_REUSEPORT: the kernel spreads new connections over them).

Each connection reads frames as they arrive and runs every request as its own task, so
pipelined requests overlap and replies go out in completion order (the client matches them by
``seq_num``). At most ``max_in_flight`` requests run per connection; beyond that the connection
stops reading until one finishes (TCP backpressure instead of unbounded queues). A frame longer
than ``max_frame_bytes`` is answered ``message_too_large`` and the connection closed, before
anything of that size is allocated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .frontend import WireFrontend, error_code
from .protocol import (
    MAGIC,
    REQ_HEADER,
    REQ_HEADER_LEN,
    VERSION,
    Errc,
    error_response,
    response,
)
from .rpc_table import BY_FID, NAME_OF_FID, RpcType
from .structpack import Err, Expected, Vector, WireError

log = logging.getLogger("mooncake_redis.wire")

MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_IN_FLIGHT = 64


class WireMetrics:
    """This process's wire figures, on the worker's registry when it has one."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry or CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "mooncake_wire_requests_total", "coro_rpc requests served.", ["rpc"], registry=reg
        )
        self.failures = Counter(
            "mooncake_wire_failures_total",
            "coro_rpc requests answered with an error (Mooncake or coro_rpc).",
            ["rpc"],
            registry=reg,
        )
        self.latency = Histogram(
            "mooncake_wire_latency_seconds",
            "Latency of each coro_rpc request in this worker.",
            ["rpc"],
            buckets=(0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
            registry=reg,
        )
        self.connections = Gauge(
            "mooncake_wire_connections", "Open coro_rpc connections.", registry=reg
        )
        self.dropped = Counter(
            "mooncake_wire_dropped_connections_total",
            "Connections closed for a bad header or an oversized frame.",
            registry=reg,
        )
        self._of: dict[str, tuple[Any, Any, Any]] = {}

    def of(self, rpc: str) -> tuple[Any, Any, Any]:
        """The RPC's requests counter, latency histogram and failures counter (``labels``
        takes a lock and builds a key: once per RPC, not per call)."""
        got = self._of.get(rpc)
        if got is None:
            got = self._of[rpc] = (
                self.requests.labels(rpc),
                self.latency.labels(rpc),
                self.failures.labels(rpc),
            )
        return got


def _failure(rpc: RpcType, args: Any, code: int) -> Any:
    """The in-band failure of a whole call: Err, or Err per item of a batch."""
    t = rpc.response.type
    if isinstance(t, Expected):
        return Err(code)
    if isinstance(t, Vector):
        items = next((a for a in (args if isinstance(args, tuple) else (args,))
                      if isinstance(a, list)), [])  # fmt: skip
        return [Err(code)] * len(items)
    return code  # RemoveAll: a plain long


def _failed(result: Any) -> bool:
    """An Err, or a batch holding one (found from the set of its item types)."""
    if type(result) is Err:
        return True
    return type(result) is list and Err in set(map(type, result))


class _Connection(asyncio.Protocol):
    def __init__(self, server: WireServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.paused = False
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self.server.connections.add(self)
        self.server.metrics.connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections.discard(self)
        self.server.metrics.connections.dec()
        for task in self.tasks:
            task.cancel()

    def _drop(self) -> None:
        self.closing = True
        self.server.metrics.dropped.inc()
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.buf:
            self.buf += data
            self._process()
            return
        # Nothing waiting (the common case: a client sends a request, awaits its reply):
        # frames are read from the chunk itself, and only a tail that is not yet a whole
        # frame is copied into the buffer.
        pos = self._frames(data)
        if pos < len(data) and not self.closing:
            self.buf += memoryview(data)[pos:]

    def _process(self) -> None:
        """Dispatches every complete frame in the buffer, up to the in-flight bound; the rest
        waits there (and the transport stops reading) until a request finishes."""
        pos = self._frames(self.buf)
        if pos and not self.closing:
            del self.buf[:pos]

    def _frames(self, buf: bytes | bytearray) -> int:
        """Dispatches the whole frames at the start of ``buf``; returns the bytes used."""
        pos = 0
        n = len(buf)
        server = self.server
        while n - pos >= REQ_HEADER_LEN and not self.closing:
            if len(self.tasks) >= server.max_in_flight:
                if not self.paused and self.transport is not None:
                    self.paused = True
                    self.transport.pause_reading()
                break
            magic, ver, st, _mt, seq, fid, length, attach = REQ_HEADER.unpack_from(buf, pos)
            if magic != MAGIC or ver > VERSION or st != 0:
                self._drop()  # what coro_rpc does: the stream cannot be resynchronised
                break
            total = REQ_HEADER_LEN + length + attach
            if total > server.max_frame_bytes:
                self._write(error_response(seq, Errc.message_too_large, "message too large"))
                self._drop()
                break
            if n - pos < total:
                break
            body = buf[pos + REQ_HEADER_LEN : pos + REQ_HEADER_LEN + length]
            pos += total
            self._dispatch(seq, fid, body if type(body) is bytes else bytes(body))
        return pos

    def _write(self, frame: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)

    def _dispatch(self, seq: int, fid: int, body: bytes) -> None:
        rpc = BY_FID.get(fid)
        handler = self.server.frontend.handlers.get(rpc.name) if rpc is not None else None
        if rpc is None or handler is None:
            name = NAME_OF_FID.get(fid, f"{fid:#010x}")
            self.server.metrics.failures.labels(name).inc()
            self._write(error_response(seq, Errc.function_not_registered))
            return
        try:
            args = rpc.request.decode(body) if rpc.request is not None else None
        except WireError as exc:
            log.debug("%s: undecodable arguments: %s", rpc.name, exc)
            self.server.metrics.failures.labels(rpc.name).inc()
            self._write(error_response(seq, Errc.invalid_rpc_arguments))
            return
        task = asyncio.get_running_loop().create_task(self._run(seq, rpc, handler, args))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        bound = self.server.max_in_flight
        if self.paused and not self.closing and len(self.tasks) < bound:
            self._process()  # frames that waited in the buffer (reading stays paused)
            if len(self.tasks) < bound and self.transport is not None and not self.closing:
                self.paused = False
                self.transport.resume_reading()
        if not self.tasks:
            self.server.idle.set()

    async def _run(self, seq: int, rpc: RpcType, handler: Any, args: Any) -> None:
        server = self.server
        start = time.perf_counter()
        try:
            result = await handler(args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result = _failure(rpc, args, error_code(exc))
        try:
            body = rpc.response.encode(result, server.literals)
        except ValueError as exc:
            log.error("%s: result does not encode: %s", rpc.name, exc)
            server.metrics.failures.labels(rpc.name).inc()
            self._write(error_response(seq, Errc.invalid_rpc_result, "invalid rpc result"))
            return
        self._write(response(seq, body))
        requests, latency, failures = server.metrics.of(rpc.name)
        requests.inc()
        latency.observe(time.perf_counter() - start)
        if _failed(result):
            failures.inc()


class WireServer:
    """The listener of one worker process."""

    def __init__(
        self,
        frontend: WireFrontend,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        reuse_port: bool = True,
        literals: bool = True,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        metrics: WireMetrics | None = None,
    ) -> None:
        self.frontend = frontend
        self.host, self.port = host, port
        self.reuse_port = reuse_port
        self.literals = literals  # send type literals, as the (debug-built) real master does
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self.metrics = metrics or WireMetrics()
        self.connections: set[_Connection] = set()
        self.idle = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            reuse_port=self.reuse_port,
            reuse_address=True,
            backlog=1024,
        )
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        log.info("coro_rpc (Mooncake master protocol) on %s:%d", self.host, self.port)

    def stop_accepting(self) -> None:
        """Closes the listening socket; open connections are still served."""
        if self._server is not None and self._server.is_serving():
            self._server.close()
            log.info("coro_rpc: no longer accepting on port %d", self.port)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stops accepting, lets requests in flight finish (up to ``timeout``), then closes."""
        self.stop_accepting()
        deadline = time.monotonic() + timeout
        while any(c.tasks for c in self.connections) and time.monotonic() < deadline:
            self.idle.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.idle.wait(), max(0.0, deadline - time.monotonic()))
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
