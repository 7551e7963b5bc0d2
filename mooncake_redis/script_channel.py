"""One multiplexed RESP connection for the scripts' calls on a single Redis over TCP.

Every RPC is one or more script calls, one round trip each, and redis-py's asyncio client spends
about four event-loop iterations and 40-60 us of this process's CPU on each (pool checkout and
release, its retry and timeout layers, observability hooks), against about 10 us for a bare
protocol: one write, one parse, one future (tests/round_trip_cpu.py, docs/benchmarks.md). A
worker's or a replay's Python side is mostly those round trips, so the scripts take this path:

- Calls from any number of tasks share one connection: Redis answers a connection's commands in
  order, so each reply resolves the oldest waiting future. A Redis runs one script at a time,
  so the pool's parallel connections bought nothing for scripts.
- Replies are parsed by hiredis with redis-py's own error classes (``NoScriptError``,
  ``OutOfMemoryError``, ``BusyLoadingError``...), so the backend's error mapping and its resend
  of an idempotent step after a lost connection are the same as on the pool.
- A lost connection fails every waiting call with ``ConnectionError`` (as redis-py's retry-less
  connections do); the next call connects again. A task cancelled while it waits leaves its
  reply to be read and dropped, in order.
- Connections are per event loop: a call from another loop (a new ``asyncio.run``) connects anew.

Only plain TCP without a socket timeout takes it (``Backend.from_url``): TLS, unix sockets, a
cluster, a configured ``socket_timeout`` and decoded replies keep redis-py's connections, as
every plain command, pipeline and INFO read does. A cluster would need redis-py's own handling
of a failed node (its slot map refreshed, its connections marked) beside each node's channel.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

import hiredis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError


def _pack(*args: Any) -> bytes:
    packed: bytes = hiredis.pack_command(args)
    return packed


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(
            protocolError=InvalidResponse, replyError=BaseParser.parse_error
        )
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        while True:
            try:
                reply = self.reader.gets()
            except Exception as exc:  # a protocol error: nothing after it can be trusted
                self._fail(RedisConnectionError(f"Redis protocol error: {exc}"))
                if self.transport is not None:
                    self.transport.close()
                return
            if reply is False:
                return
            if not waiting:  # a reply nobody asked for: the stream is out of step
                self._fail(RedisConnectionError("Redis sent a reply no call was waiting for"))
                if self.transport is not None:
                    self.transport.close()
                return
            fut = waiting.popleft()
            if fut.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):  # an error reply (redis-py's class for it)
                fut.set_exception(reply)
            else:
                fut.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError("Connection closed by server."))

    def _fail(self, error: Exception) -> None:
        if self.lost is None:
            self.lost = error
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                with contextlib.suppress(RuntimeError):  # a closed loop's future
                    fut.set_exception(error)

    def send(self, payload: bytes) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.lost is not None or self.transport is None or self.transport.is_closing():
            fut.set_exception(self.lost or RedisConnectionError("Connection closed."))
            return fut
        self.waiting.append(fut)
        self.transport.write(payload)
        return fut


class ScriptChannel:
    """Script calls to one Redis (``host``:``port``, database ``db``) on one connection."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        client_name: str | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self.host, self.port, self.db = host, port, db
        self.username, self.password, self.client_name = username, password, client_name
        self.connect_timeout = connect_timeout
        self._proto: _Protocol | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()

    async def execute(self, *args: Any, **_options: Any) -> Any:
        """Sends one command and returns its reply (a Redis error raised as redis-py's class)."""
        proto = self._proto
        if proto is None or proto.lost is not None or self._loop is not asyncio.get_running_loop():
            proto = await self._connected()
        return await proto.send(_pack(*args))

    async def _connected(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # another event loop: its connection cannot serve this one
            self._drop()
            self._loop, self._lock = loop, asyncio.Lock()
        async with self._lock:  # one connect at a time; the others use it
            if self._proto is None or self._proto.lost is not None:
                self._drop()
                self._proto = await self._connect(loop)
            return self._proto

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Protocol:
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(_Protocol, self.host, self.port), self.connect_timeout
            )
        except asyncio.TimeoutError as exc:
            raise RedisTimeoutError(f"Timeout connecting to {self.host}:{self.port}.") from exc
        except OSError as exc:  # worded as redis-py words it
            where = f"{self.host}:{self.port}"
            if len(exc.args) == 1:
                msg = f"Error connecting to {where}. {exc.args[0]}."
            else:
                msg = f"Error {exc.args[0]} connecting to {where}. {exc.args[1]}."
            raise RedisConnectionError(msg) from exc
        try:
            if self.password is not None:
                auth = (self.username, self.password) if self.username else (self.password,)
                await proto.send(_pack("AUTH", *auth))
            if self.db:
                await proto.send(_pack("SELECT", self.db))
            if self.client_name:
                await proto.send(_pack("CLIENT", "SETNAME", self.client_name))
        except BaseException:
            if proto.transport is not None:
                proto.transport.close()
            raise
        return proto

    def _drop(self) -> None:
        proto, self._proto = self._proto, None
        if proto is not None:
            proto._fail(RedisConnectionError("Connection closed."))
            if proto.transport is not None:
                with contextlib.suppress(Exception):  # its loop may be closed already
                    proto.transport.close()

    def drop_if_idle(self) -> None:
        """Closes the connection unless a call waits on it (after a lost connection elsewhere:
        Redis may have restarted, and an idle connection would fail its next call)."""
        if self._proto is not None and not self._proto.waiting:
            self._drop()

    async def aclose(self) -> None:
        self._drop()
