"""Keep-alive HTTP/1.1 connections to the workers: a blocking one on sockets and an asyncio one
on a Protocol, both over the parser of :mod:`.http11`.

httpx costs 1-1.8 ms of CPU per call (its async stack most of it); a call here costs about what
``http.client`` over a kept-alive connection does. Each transport keeps idle connections per
worker (the most recent first), drops one that has been idle longer than ``keepalive_s``
(shorter than the server's keep-alive, so a request never races a server-side close) or that
the server has closed, and classifies every failure for the retry policy:

- :class:`NotSent`: the request cannot have reached a worker (no connection could be made, or
  none was free in time); any RPC may be sent again.
- :class:`MaybeSent`: it may have been applied (timeout, dropped connection, bad response);
  only idempotent RPCs may be sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, cast

from .http11 import Origin, ProtocolError, Response, ResponseParser, request_bytes, request_head

Reply = tuple[int, bytes]  # status, body


@dataclass(frozen=True)
class Options:
    """What every transport is given: the headers of every request, and its limits."""

    headers: dict[str, str]
    timeout: float = 10.0  # for a response (and for a free connection)
    connect_timeout: float = 2.0
    keepalive_s: float = 2.0  # shorter than the server's keep-alive (uvicorn: 5 s; serve: 30 s)
    max_connections: int = 64  # sync: idle ones kept per worker; async: requests in flight


class TransportError(Exception):
    """A request that got no HTTP response."""


class NotSent(TransportError):
    """Nothing reached a worker."""


class MaybeSent(TransportError):
    """The worker may have received (and applied) the request."""


class _Heads:
    """Request heads per (origin, method, path), built once."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self._cache: dict[tuple[Origin, str, str], bytes] = {}

    def __call__(self, origin: Origin, method: str, path: str, body: bytes) -> bytes:
        key = (origin, method, path)
        head = self._cache.get(key)
        if head is None:
            head = self._cache[key] = request_head(origin, method, path, self.headers)
        return request_bytes(head, body)


def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def _readable(sock: socket.socket) -> bool:
    """An idle keep-alive connection with something to read has been closed by the server."""
    try:
        if hasattr(select, "poll"):  # any fd number (select() stops at 1024)
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _SocketConnection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.parser = ResponseParser()
        self.idle_since = 0.0

    def exchange(self, data: bytes) -> Response:
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                response = self.parser.eof()
                if response is None:
                    raise ConnectionResetError("connection closed before the response")
                return response
            response = self.parser.feed(chunk)
            if response is not None:
                return response

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class SyncTransport:
    """Blocking keep-alive connections; thread-safe (each call takes its own connection)."""

    def __init__(self, options: Options) -> None:
        self._heads = _Heads(options.headers)
        self.timeout = options.timeout
        self.connect_timeout = options.connect_timeout
        self.keepalive_s = options.keepalive_s
        self.max_idle = options.max_connections
        self._idle: dict[Origin, deque[_SocketConnection]] = {}

    def _take(self, origin: Origin) -> _SocketConnection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            try:
                conn = idle.pop()
            except IndexError:
                return None
            if now - conn.idle_since < self.keepalive_s and not _readable(conn.sock):
                return conn
            conn.close()
        return None

    def _connect(self, origin: Origin) -> _SocketConnection:
        try:
            sock = socket.create_connection((origin.host, origin.port), self.connect_timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if origin.scheme == "https":
                    sock = _tls().wrap_socket(sock, server_hostname=origin.host)
                sock.settimeout(self.timeout)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            raise NotSent(f"{type(exc).__name__}: {exc}") from exc
        return _SocketConnection(sock)

    def request(self, origin: Origin, method: str, path: str, body: bytes = b"") -> Reply:
        data = self._heads(origin, method, path, body)
        conn = self._take(origin) or self._connect(origin)
        try:
            response = conn.exchange(data)
        except (OSError, ProtocolError) as exc:
            conn.close()
            raise MaybeSent(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        idle = self._idle.setdefault(origin, deque())
        if response.keep_alive and len(idle) < self.max_idle:
            conn.idle_since = time.monotonic()
            idle.append(conn)
        else:
            conn.close()
        return response.status, response.body

    def close(self) -> None:
        for idle in self._idle.values():
            while idle:
                idle.pop().close()


class _StreamConnection(asyncio.Protocol):
    """One connection; at most one request in flight on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.waiter: asyncio.Future[Response] | None = None
        self.closed = False
        self.idle_since = 0.0
        self.loop = asyncio.get_running_loop()
        self.made: asyncio.Future[None] = self.loop.create_future()  # uvloop calls back later

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if not self.made.done():
            self.made.set_result(None)

    def data_received(self, data: bytes) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():  # unasked-for bytes: the connection is unusable
            self.close()
            return
        try:
            response = self.parser.feed(data)
        except ProtocolError as exc:
            waiter.set_exception(exc)
            return
        if response is not None:
            self.waiter = None
            waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.made.done():
            self.made.set_exception(exc or ConnectionResetError("closed while connecting"))
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            response = self.parser.eof()
            if response is not None:
                waiter.set_result(response)
            else:
                waiter.set_exception(ConnectionResetError("connection closed before the response"))

    async def exchange(self, data: bytes, timeout: float) -> Response:
        assert self.transport is not None
        self.waiter = waiter = self.loop.create_future()
        self.transport.write(data)
        timer = self.loop.call_later(timeout, _expire, waiter)
        try:
            response: Response = await waiter
        finally:
            timer.cancel()
        return response

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no response in time"))


class AsyncTransport:
    """asyncio keep-alive connections, at most ``max_connections`` requests in flight."""

    def __init__(self, options: Options) -> None:
        self._heads = _Heads(options.headers)
        self.timeout = options.timeout
        self.connect_timeout = options.connect_timeout
        self.keepalive_s = options.keepalive_s
        self.max_connections = max(1, options.max_connections)
        self._idle: dict[Origin, list[_StreamConnection]] = {}
        self._slots: asyncio.Semaphore | None = None

    def _take(self, origin: Origin) -> _StreamConnection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.loop is loop and now - conn.idle_since < self.keepalive_s:
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> _StreamConnection:
        loop = asyncio.get_running_loop()
        tls = _tls() if origin.scheme == "https" else None

        async def connect() -> _StreamConnection:
            _, conn = await loop.create_connection(
                _StreamConnection, origin.host, origin.port, ssl=tls
            )
            await conn.made
            return conn

        try:
            return await asyncio.wait_for(connect(), self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise NotSent(f"{type(exc).__name__}: {exc}") from exc

    async def _slot(self) -> asyncio.Semaphore:
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(self.max_connections)
        if slots.locked():
            try:
                await asyncio.wait_for(slots.acquire(), self.timeout)
            except asyncio.TimeoutError as exc:
                raise NotSent("no free connection in time") from exc
        else:
            await slots.acquire()
        return slots

    async def request(self, origin: Origin, method: str, path: str, body: bytes = b"") -> Reply:
        data = self._heads(origin, method, path, body)
        slots = await self._slot()
        try:
            conn = self._take(origin) or await self._connect(origin)
            try:
                response = await conn.exchange(data, self.timeout)
            except (OSError, ProtocolError) as exc:  # TimeoutError is an OSError
                conn.close()
                raise MaybeSent(f"{type(exc).__name__}: {exc}") from exc
            except BaseException:  # cancelled mid-request: the connection's state is unknown
                conn.close()
                raise
            if response.keep_alive and not conn.closed:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(conn)
            else:
                conn.close()
            return response.status, response.body
        finally:
            slots.release()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()
