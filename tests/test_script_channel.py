"""The scripts' multiplexed connection (script_channel.py) on a real Redis: replies reach their
callers in order under concurrency, a cancelled caller leaves the stream in step, a lost
connection fails its waiting calls as a lost connection (an idempotent step is resent, then the
channel connects again), Redis errors keep redis-py's classes (NOSCRIPT falls back to EVAL, OOM
and script errors map as on the pool), a new event loop connects anew, and a URL's user,
password and database are honoured. A socket timeout keeps the pool."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from redis.exceptions import ResponseError

from mooncake_redis.backend import Backend
from mooncake_redis.errors import ErrorCode, MooncakeError
from mooncake_redis.lua_loader import LuaScript
from tests.servers import RedisProcess, free_port

# Test scripts: (name, shebang, body, header); the header's "Idempotent: yes" allows a resend.
_SCRIPTS = [
    ("t_echo", "#!lua flags=no-writes", "return {KEYS[1], ARGV[1]}", "Returns: both"),
    (
        "t_slow",
        "#!lua flags=no-writes",
        "local t = redis.call('TIME')\n"
        "local stop = tonumber(t[1]) * 1e6 + tonumber(t[2]) + tonumber(ARGV[1])\n"
        "repeat t = redis.call('TIME') until tonumber(t[1]) * 1e6 + tonumber(t[2]) >= stop\n"
        "return ARGV[2]",
        "Returns: ARGV[2] after ARGV[1] us",
    ),
    ("t_write", "#!lua", "return redis.call('INCR', KEYS[1])", "Returns: the count"),
    ("t_set", "#!lua", "return redis.call('SET', KEYS[1], ARGV[1])", "Idempotent: yes"),
    ("t_fail", "#!lua flags=no-writes", "return redis.error_reply('ERR t_fail said no')", ""),
]
SCRIPTS = {n: LuaScript(name=n, shebang=sb, body=b, header=h) for n, sb, b, h in _SCRIPTS}
ECHO = SCRIPTS["t_echo"]


def _backend(url: str) -> Backend:
    backend = Backend.from_url(url)
    backend.scripts.update(SCRIPTS)
    return backend


def _kill(url: str, name: str) -> int:
    """Kills every connection named ``name`` (the channel's, and the pool's if any)."""
    r = redis.Redis.from_url(url.split("?")[0])
    killed = 0
    for c in r.client_list():
        if c.get("name") == name:
            r.client_kill_filter(_id=c["id"])
            killed += 1
    r.close()
    return killed


async def test_concurrent_calls_get_their_own_replies(redis_url: str) -> None:
    backend = _backend(redis_url)
    try:
        assert backend.channel is not None
        tag = uuid.uuid4().hex
        got = await asyncio.gather(
            *(
                backend.call("t_echo", [f"{{{tag}}}:{i}"], [f"v{i}" * (i % 7 + 1)])
                for i in range(300)
            )
        )
        assert got == [
            [f"{{{tag}}}:{i}".encode(), (f"v{i}" * (i % 7 + 1)).encode()] for i in range(300)
        ]
        # A long reply (about 3 MB) arrives in many chunks.
        big = "x" * 3_000_000
        assert (await backend.call("t_echo", [f"{{{tag}}}:big"], [big]))[1] == big.encode()
    finally:
        await backend.aclose()


async def test_a_cancelled_caller_leaves_the_stream_in_step(redis_url: str) -> None:
    backend = _backend(redis_url)
    try:
        slow = asyncio.ensure_future(backend.call("t_slow", ["{c}:k"], [50_000, "slow"]))
        await asyncio.sleep(0.01)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        # The slow script's reply comes first on the connection: it is read and dropped.
        assert await backend.call("t_echo", ["{c}:k"], ["next"]) == [b"{c}:k", b"next"]
    finally:
        await backend.aclose()


async def test_a_lost_connection_fails_its_calls_then_reconnects(redis_url: str) -> None:
    name = "chan" + uuid.uuid4().hex[:8]
    url = f"{redis_url}{'&' if '?' in redis_url else '?'}client_name={name}"
    backend = _backend(url)
    key = "{c" + uuid.uuid4().hex + "}:n"
    admin = redis.Redis.from_url(redis_url)
    try:
        assert await backend.call("t_write", [key], []) == 1
        # Writes held by CLIENT PAUSE: the connection dies under a waiting write step (not
        # idempotent): RPC_FAIL, no resend, and the write never ran.
        admin.execute_command("CLIENT", "PAUSE", 2000, "WRITE")
        write = asyncio.ensure_future(backend.call("t_write", [key], []))
        await asyncio.sleep(0.05)
        assert await asyncio.to_thread(_kill, url, name) >= 1
        with pytest.raises(MooncakeError) as err:
            await write
        assert err.value.code == ErrorCode.RPC_FAIL
        # An idempotent step waiting when its connection dies is resent once, on a new
        # connection (held too, until the pause ends).
        again = asyncio.ensure_future(backend.call("t_set", [key], ["7"]))
        await asyncio.sleep(0.05)
        assert await asyncio.to_thread(_kill, url, name) >= 1
        await asyncio.sleep(0.05)
        assert not again.done()
        admin.execute_command("CLIENT", "UNPAUSE")
        assert await again == b"OK"
        assert admin.get(key) == b"7"
        # The channel connects again for the next calls.
        assert await backend.call("t_write", [key], []) == 8
        assert await backend.call("t_echo", [key], ["back"]) == [key.encode(), b"back"]
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.delete(key)
        admin.close()
        await backend.aclose()


async def test_redis_errors_keep_their_meaning(redis_url: str) -> None:
    backend = _backend(redis_url)
    r = redis.Redis.from_url(redis_url)
    try:
        # NOSCRIPT (the cache flushed): EVAL runs it and caches it again.
        r.script_flush()
        assert await backend.call("t_echo", ["{e}:k"], ["v"]) == [b"{e}:k", b"v"]
        assert r.script_exists(ECHO.sha(True)) == [True]
        # A script's own error: the same ResponseError the pool raises (unmapped).
        with pytest.raises(ResponseError, match="t_fail said no"):
            await backend.call("t_fail", ["{e}:k"], [])

    finally:
        r.close()
        await backend.aclose()


async def test_out_of_memory_maps_as_on_the_pool() -> None:
    """A write a full Redis refuses: NO_AVAILABLE_HANDLE (a private server: maxmemory is set)."""
    server = RedisProcess(
        free_port(),
        Path(tempfile.mkdtemp(prefix="mcr-chan-")),
        ["--maxmemory", "1mb", "--maxmemory-policy", "noeviction", "--appendonly", "no"],
    )
    server.start()
    backend = _backend(f"redis://127.0.0.1:{server.port}")
    try:
        assert backend.channel is not None
        with pytest.raises(MooncakeError) as err:
            await backend.call("t_set", ["{o}:k"], ["v" * 2_000_000])
        assert err.value.code == ErrorCode.NO_AVAILABLE_HANDLE
        assert await backend.call("t_echo", ["{o}:k"], ["read"]) == [b"{o}:k", b"read"]
    finally:
        await backend.aclose()
        server.stop(kill=True)


def test_each_event_loop_connects_anew(redis_url: str) -> None:
    backend = _backend(redis_url)

    async def once(v: str) -> Any:
        return await backend.call("t_echo", ["{l}:k"], [v])

    assert asyncio.run(once("a")) == [b"{l}:k", b"a"]
    assert asyncio.run(once("b")) == [b"{l}:k", b"b"]
    asyncio.run(backend.aclose())


async def test_url_user_password_and_database(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    user, pw = "chan" + uuid.uuid4().hex[:8], uuid.uuid4().hex
    r.acl_setuser(user, enabled=True, passwords=[f"+{pw}"], keys=["*"], commands=["+@all"])
    parts = urlsplit(redis_url)
    url = f"redis://{user}:{pw}@{parts.hostname}:{parts.port}/3"
    backend = _backend(url)
    key = "{d" + uuid.uuid4().hex + "}:n"
    try:
        assert await backend.call("t_write", [key], []) == 1
        assert redis.Redis(host=parts.hostname, port=parts.port, db=3).get(key) == b"1"
        assert r.get(key) is None  # not in the URL's default database 0
        bad = _backend(f"redis://{user}:wrong@{parts.hostname}:{parts.port}/3")
        with pytest.raises(MooncakeError):
            await bad.call("t_echo", [key], ["v"])
        await bad.aclose()
    finally:
        await backend.aclose()
        redis.Redis(host=parts.hostname, port=parts.port, db=3).delete(key)
        r.acl_deluser(user)
        r.close()


def test_a_socket_timeout_keeps_the_pool(redis_url: str) -> None:
    sep = "&" if "?" in redis_url else "?"
    assert Backend.from_url(f"{redis_url}{sep}socket_timeout=5").channel is None
    assert Backend.from_url(redis_url).channel is not None
    assert Backend.from_url(redis_url, decode_responses=True).channel is None  # str replies
    assert Backend.from_url("fakeredis://x").channel is None
