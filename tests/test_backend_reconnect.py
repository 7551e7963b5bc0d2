"""The backend's reconnect path under the races a Redis restart brings (CI's chaos run once
answered ``INTERNAL_ERROR: RuntimeError`` at a Redis outage):

- a write on a connection whose transport is already closed is a lost connection
  (ConnectionError, so an idempotent step is resent and anything else answers RPC_FAIL), also
  on uvloop, which the worker runs and which raises a bare RuntimeError there;
- dropping the idle connections after a lost one never closes a connection that another task
  has just taken.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvloop  # uvicorn[standard] brings it: the workers run on it
from redis.exceptions import ConnectionError as RedisConnectionError

from mooncake_redis.backend import Backend, lost_transport, map_redis_error
from mooncake_redis.errors import ErrorCode, MooncakeError


def _closed_under(backend: Backend) -> Any:
    """The one idle pooled connection, its transport closed as a peer reset closes it (the
    connection object still believes it is connected)."""
    (conn,) = backend.client.connection_pool._available_connections
    assert conn.is_connected
    conn._writer.transport.abort()
    return conn


async def _write_on_closed_transport(url: str) -> None:
    backend = Backend.from_url(url)
    try:
        assert await backend.command("PING") in (True, b"PONG")
        _closed_under(backend)
        await asyncio.sleep(0.05)  # the loop finishes closing the transport
        # An idempotent command: the lost connection is dropped and the command resent.
        assert await backend.command("PING") in (True, b"PONG")
        _closed_under(backend)
        await asyncio.sleep(0.05)
        # Not idempotent: RPC_FAIL when the write met the closed transport (redis-py <= 8.1
        # hands the pooled connection out as it is); redis-py 8.2 checks a pooled connection
        # before handing it out and reconnects, so nothing was sent on the dead one and the
        # command is answered. Never another error (the INTERNAL_ERROR: RuntimeError of old).
        try:
            assert await backend.command("PING", idempotent=False) in (True, b"PONG")
        except MooncakeError as e:
            assert e.code == ErrorCode.RPC_FAIL, e
        assert await backend.command("PING") in (True, b"PONG")  # and it works again
        # The write itself, whatever the pool does: a ConnectionError on every loop and
        # redis-py version (uvloop's RuntimeError is mapped by connections._write).
        conn = _closed_under(backend)
        await asyncio.sleep(0.05)
        with pytest.raises(RedisConnectionError):
            await conn.send_packed_command(conn.pack_command("PING"), check_health=False)
    finally:
        await backend.aclose()


def test_write_on_a_reset_connection_is_a_lost_connection_under_uvloop(redis_url: str) -> None:
    """uvloop raises ``RuntimeError: unable to perform operation on <TCPTransport
    closed=True>; the handler is closed`` for this write (the stdlib loop raises
    ConnectionResetError); before the fix it reached the route as INTERNAL_ERROR."""
    uvloop.run(_write_on_closed_transport(redis_url))


async def test_write_on_a_reset_connection_is_a_lost_connection(redis_url: str) -> None:
    await _write_on_closed_transport(redis_url)


def test_lost_transport_maps_to_rpc_fail() -> None:
    exc = RuntimeError(
        "unable to perform operation on <TCPTransport closed=True reading=False 0x1>; "
        "the handler is closed"
    )
    assert lost_transport(exc)
    mapped = map_redis_error(exc, "PING")
    assert mapped is not None and mapped.code == ErrorCode.RPC_FAIL
    assert map_redis_error(RuntimeError("something else"), "PING") is None


async def test_dropping_idle_connections_spares_the_ones_tasks_took(
    real_backend_url: str,
) -> None:
    """Tasks that take an idle connection while another task drops the idle ones (after a lost
    connection) get a working connection. redis-py's pool.disconnect(inuse_connections=False)
    and ClusterNode.disconnect_free_connections closed them under those tasks: every one of
    them failed with "Connection lost"."""
    backend = Backend.from_url(real_backend_url)
    await backend.connect()
    # On a cluster, one node's connections (the ones its node drops).
    node = backend.client.get_primaries()[0] if backend.cluster else None
    extra = {"target_nodes": node} if node is not None else {}
    failures: list[BaseException] = []

    async def ping() -> None:
        try:
            await backend.client.execute_command("PING", **extra)
        except Exception as exc:
            failures.append(exc)

    try:
        for _ in range(5):
            await asyncio.gather(*(ping() for _ in range(40)))  # 40 idle connections
            assert not failures, failures
            takers = [asyncio.ensure_future(ping()) for _ in range(20)]
            await backend._drop_idle_connections(node)
            await asyncio.gather(*takers)
            assert not failures, failures[:3]
    finally:
        await backend.aclose()
