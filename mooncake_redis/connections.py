"""redis-py connection classes and pool handling for the backend.

- A write on a connection Redis reset is a lost connection (ConnectionError) on every event loop
  (:func:`lost_transport`): the TCP (hiredis packing), TLS and unix connection classes.
- Dropping the idle connections after a lost one (:func:`drop_idle`, :func:`drop_idle_on_node`)
  never closes a connection another task has just taken.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Sequence
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError


def lost_transport(exc: BaseException) -> bool:
    """uvloop's error for a write on a connection whose transport is already closed: ``RuntimeError:
    unable to perform operation on <TCPTransport closed=True ...>; the handler is closed``.

    The worker runs uvloop (``serve``). When Redis resets a connection (SIGKILLed with a new
    connection's handshake unread, or a connection closed under a task that just took it) and
    the loop handles the reset before redis-py's next write (redis-py writes through
    ``asyncio.wait_for`` when a socket timeout is set, one loop iteration later), uvloop raises
    this RuntimeError where the stdlib loop raises ConnectionResetError. redis-py maps only the
    latter to ConnectionError, so the former escaped as a bare RuntimeError (a chaos run's
    ``INTERNAL_ERROR: RuntimeError`` at a Redis outage).
    """
    return isinstance(exc, RuntimeError) and "the handler is closed" in str(exc)


async def _write(conn: Any, sending: Awaitable[None]) -> None:
    """Awaits a connection's ``send_packed_command``; a write on a closed transport (redis-py
    has disconnected the connection already) is raised as the ConnectionError it is."""
    try:
        await sending
    except RuntimeError as exc:
        if not lost_transport(exc):
            raise
        host = conn._host_error() if hasattr(conn, "_host_error") else "Redis"
        raise RedisConnectionError(f"Error while writing to {host}: connection reset") from exc


async def _disconnect_all(connections: Sequence[Any]) -> None:
    await asyncio.gather(*(c.disconnect() for c in connections), return_exceptions=True)


class FastConnection(aioredis.Connection):
    """Packs commands with hiredis: batch scripts carry hundreds of arguments, and redis-py's
    asyncio connection packs them in pure Python (about 3 us an argument). A write on a reset
    connection raises ConnectionError on every event loop (:func:`lost_transport`)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if isinstance(args[0], str) and " " in args[0]:
            args = (*args[0].split(), *args[1:])
        return [hiredis.pack_command(args)]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        await _write(self, super().send_packed_command(command, check_health))


class TlsConnection(aioredis.SSLConnection):
    """redis-py's TLS connection; a write on a reset connection raises ConnectionError."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        await _write(self, super().send_packed_command(command, check_health))


class UnixConnection(aioredis.UnixDomainSocketConnection):
    """redis-py's unix socket connection; a write on a reset connection raises
    ConnectionError."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        await _write(self, super().send_packed_command(command, check_health))


async def drop_idle(pool: Any) -> None:
    """Disconnects a standalone pool's idle connections (they reconnect on their next use)
    while holding the pool's lock, the one ``get_connection`` and ``release`` take: no task can
    take one of them while it closes.

    redis-py's own call for this, ``ConnectionPool.disconnect(inuse_connections=False)``,
    neither locks the pool nor takes the connections out of it: a task taking one meanwhile had
    its command cut (every call that took an idle connection in the same loop iteration failed
    with "Connection lost"; under uvloop, RuntimeError). It stays the fallback for a pool
    without those attributes (another redis-py).
    """
    lock = getattr(pool, "_lock", None)
    available = getattr(pool, "_available_connections", None)
    if not isinstance(lock, asyncio.Lock) or not isinstance(available, list):
        await pool.disconnect(inuse_connections=False)
        return
    async with lock:
        await _disconnect_all(list(available))


async def drop_idle_on_node(node: Any) -> None:
    """A cluster node's idle connections: the node (no lock: it hands out connections
    synchronously) forgets them before they close, and makes new ones as tasks need them, up to
    its maximum. ``ClusterNode.disconnect_free_connections`` closed them where they lay, under
    any task that took one meanwhile; it stays the fallback."""
    free = getattr(node, "_free", None)
    every = getattr(node, "_connections", None)
    if not isinstance(free, collections.deque) or not isinstance(every, list):
        await node.disconnect_free_connections()
        return
    idle = list(free)
    free.clear()  # no await since the copy: nobody took one meanwhile
    for conn in idle:
        every.remove(conn)
    await _disconnect_all(idle)
