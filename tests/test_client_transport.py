"""The clients' own HTTP/1.1 transports: the response parser, keep-alive reuse, a server-side
close between calls, timeouts and dropped connections sorted for the retry policy, failover
over several URLs, cancellation; and that importing the client loads neither the service nor
redis, and that its generated methods are current."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvicorn

from mooncake_redis import Config, ErrorCode, MooncakeError
from mooncake_redis.client import AsyncMasterClient, MasterClient
from mooncake_redis.client.http11 import Origin, ProtocolError, ResponseParser
from mooncake_redis.server.app import ServerSettings, create_app
from tests.servers import free_port


def test_import_loads_neither_the_service_nor_redis() -> None:
    code = (
        "import sys, mooncake_redis.client\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mooncake_redis', 'redis', 'httpx', 'fastapi', 'starlette', 'uvicorn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert eval(out.stdout) == [
        "mooncake_redis",
        "mooncake_redis.client",
        "mooncake_redis.client.async_rpcs",
        "mooncake_redis.client.base",
        "mooncake_redis.client.http11",
        "mooncake_redis.client.sync_rpcs",
        "mooncake_redis.client.transport",
        "mooncake_redis.config",
        "mooncake_redis.errors",
        "mooncake_redis.server",
        "mooncake_redis.server.bodies",
        "mooncake_redis.server.schemas",
        "mooncake_redis.types",
    ]


def test_generated_methods_are_current() -> None:
    from mooncake_redis.client import generate

    for path, text in generate.sources().items():
        assert text == path.read_text(), (
            f"{path} stale: run python -m mooncake_redis.client.generate"
        )


def test_client_methods_have_the_service_signatures() -> None:
    import inspect

    from mooncake_redis import MasterService
    from mooncake_redis.server.schemas import RPCS

    for name in RPCS:
        want = inspect.signature(getattr(MasterService, name))
        for cls in (MasterClient, AsyncMasterClient):
            assert inspect.signature(getattr(cls, name)) == want, (cls.__name__, name)
        assert inspect.iscoroutinefunction(getattr(AsyncMasterClient, name))
        assert not inspect.iscoroutinefunction(getattr(MasterClient, name))


# -- the parser -----------------------------------------------------------------------------


def feed_all(parser: ResponseParser, data: bytes, step: int) -> Any:
    got = None
    for i in range(0, len(data), step):
        r = parser.feed(data[i : i + step])
        if r is not None:
            assert got is None and i + step >= len(data), "one response, at the end"
            got = r
    return got


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_parser_frames_length_chunked_and_1xx(step: int) -> None:
    answers = [  # one after another on one connection, as the transports use it
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
        b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    ]
    parser = ResponseParser()
    got = [feed_all(parser, a, step) for a in answers]
    assert [(r.status, r.body, r.keep_alive) for r in got] == [
        (200, b"hello", True), (404, b"abcde", True), (204, b"", True), (200, b"ok", False),
    ]  # fmt: skip
    # Bytes after a complete response (we never pipeline): the connection is not reused.
    r = ResponseParser().feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP")
    assert r is not None and r.body == b"x" and not r.keep_alive
    # HTTP/1.0 without a length: the body ends with the connection.
    p = ResponseParser()
    assert p.feed(b"HTTP/1.0 200 OK\r\n\r\npart") is None
    eof = p.eof()
    assert eof is not None and eof.body == b"part" and not eof.keep_alive
    p = ResponseParser()
    assert p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort") is None
    assert p.eof() is None  # truncated: no response
    bad_heads = [b"SSH-2.0-x", b"HTTP/1.1 abc", b"HTTP/1.1 200\r\nContent-Length: x"]
    for bad in (head + b"\r\n\r\n" for head in bad_heads):
        with pytest.raises(ProtocolError):
            ResponseParser().feed(bad)
    with pytest.raises(ProtocolError):
        ResponseParser().feed(b"HTTP/1.1 200 OK\r\n" + b"x" * 70_000)


def test_origins() -> None:
    o = Origin.parse("http://127.0.0.1:50051/mc/")
    assert (o.host, o.port, o.base, o.url) == (
        "127.0.0.1",
        50051,
        "/mc",
        "http://127.0.0.1:50051/mc",
    )
    assert Origin.parse("https://[::1]").url == "https://[::1]"
    for bad in ("127.0.0.1:50051", "ftp://x", "http://x:99999"):
        with pytest.raises(MooncakeError) as exc:
            MasterClient(bad)
        assert exc.value.code == ErrorCode.INVALID_PARAMS


# -- against a real worker ---------------------------------------------------------------


def worker_app() -> Any:
    cfg = Config(redis_url=f"fakeredis://{uuid.uuid4().hex}", enable_radix_tree=True, num_shards=8)
    return create_app(ServerSettings(config=cfg, fsck_interval_s=0, evictor="off"))


class Worker:
    """A uvicorn worker in this event loop (restartable on the same port)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.app = worker_app()
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task[None] | None = None
        self.connections = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        config = uvicorn.Config(self.app, port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        assert self.server is not None and self.task is not None
        self.server.should_exit = True
        await self.task

    def open_connections(self) -> int:
        assert self.server is not None
        return len(self.server.server_state.connections)


@pytest.fixture
async def worker() -> AsyncIterator[Worker]:
    w = Worker()
    async with w.app.router.lifespan_context(w.app):
        await w.start()
        try:
            yield w
        finally:
            await w.stop()


async def test_async_client_keeps_connections_alive_and_survives_a_restart(worker: Worker) -> None:
    async with AsyncMasterClient(worker.url) as c:
        await c.mount_segment({"id": "s", "size": 1 << 20}, "cl")
        for i in range(20):
            assert await c.batch_exist_key([f"k{i}"]) == [False]
        assert worker.open_connections() == 1  # one kept-alive connection for 21 calls
        await asyncio.gather(*(c.exist_key("k") for _ in range(8)))
        assert worker.open_connections() <= 8
        # The worker restarts: it closes the idle connections, the client notices before
        # reusing one, so even a write that is never resent goes through.
        await worker.stop()
        await worker.start()
        await asyncio.sleep(0.05)
        reps = await c.put_start("cl", "after-restart", [64])
        assert reps[0].size == 64 and c.resent == 0
        assert await c.health() and await c.ready() and "master_" in await c.metrics()


async def test_async_failover_and_a_dead_worker(worker: Worker) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with AsyncMasterClient([dead, worker.url, dead], backoff_s=0.001) as c:
        for _ in range(6):
            assert await c.exist_key("k") is False
    async with AsyncMasterClient(dead, retries=2, backoff_s=0.001) as c:
        with pytest.raises(MooncakeError) as exc:
            await c.remove("k")
        assert exc.value.code == ErrorCode.RPC_FAIL


async def test_cancelled_call_does_not_poison_the_connection(worker: Worker) -> None:
    async with AsyncMasterClient(worker.url) as c:
        await c.mount_segment({"id": "s", "size": 1 << 20}, "cl")
        task = asyncio.create_task(c.batch_put_start("cl", [f"c{i}" for i in range(64)], [8] * 64))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):
            assert await c.batch_exist_key(["nope"]) == [False]


def test_sync_client_in_threads(worker_thread: str) -> None:
    with MasterClient(worker_thread) as c:
        c.mount_segment({"id": "s", "size": 1 << 20}, "cl")
        errors: list[BaseException] = []

        def lane(n: int) -> None:
            try:
                for i in range(10):
                    key = f"t{n}-{i}"
                    c.put_start("cl", key, 8)
                    c.put_end("cl", key)
                    assert c.exist_key(key) is True
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=lane, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert c.resent == 0


@pytest.fixture
def worker_thread() -> Any:
    from tests.test_client_api import LiveServer

    cfg = Config(redis_url=f"fakeredis://{uuid.uuid4().hex}", enable_radix_tree=True, num_shards=8)
    with LiveServer(ServerSettings(config=cfg, fsck_interval_s=0, evictor="off")) as server:
        yield server.url


# -- misbehaving servers -------------------------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    """A raw TCP server; the list counts the requests it read."""
    seen: list[int] = []

    async def wrapped(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await r.readuntil(b"\r\n\r\n")
            seen.append(1)
            await handler(r, w)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", seen


async def hang(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


async def hang_up(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    return  # closes without answering


async def garbage(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(b"SSH-2.0-OpenSSH\r\n\r\n")
    await w.drain()


@pytest.mark.parametrize("handler", [hang, hang_up, garbage])
@pytest.mark.parametrize(("rpc", "args", "idempotent"), [
    ("batch_exist_key", {"keys": ["k"]}, True),
    ("remove", {"key": "k"}, False),
])  # fmt: skip
async def test_maybe_sent_failures_follow_the_retry_policy(
    handler: Handler, rpc: str, args: dict[str, Any], idempotent: bool
) -> None:
    server, url, seen = await serve(handler)
    async with server:
        c = AsyncMasterClient(url, timeout=0.3, retries=2, backoff_s=0.001)
        with pytest.raises(MooncakeError) as exc:
            await getattr(c, rpc)(**args)
        await c.aclose()
    assert exc.value.code == ErrorCode.RPC_FAIL
    assert len(seen) == (3 if idempotent else 1)  # a write that may have landed is not resent
    assert c.resent == (2 if idempotent else 0)


async def test_sync_client_timeout_is_maybe_sent() -> None:
    server, url, seen = await serve(hang)
    async with server:

        def call() -> MooncakeError:
            c = MasterClient(url, timeout=0.3, retries=1, backoff_s=0.001)
            try:
                c.remove("k")
            except MooncakeError as exc:
                return exc
            finally:
                c.close()
            raise AssertionError("no error")

        err = await asyncio.to_thread(call)
    assert err.code == ErrorCode.RPC_FAIL and "timed out" in err.message
    assert len(seen) == 1


def test_async_client_on_uvloop(worker_thread: str) -> None:
    """uvloop's transports are no asyncio.Transport subclasses and call connection_made later."""
    import uvloop

    async def go() -> None:
        async with AsyncMasterClient(worker_thread) as c:
            await c.mount_segment({"id": "s", "size": 1 << 20}, "cl")
            await c.put_start("cl", "u", 8)
            await c.put_end("cl", "u")
            results = await asyncio.gather(*(c.batch_exist_key(["u", "v"]) for _ in range(10)))
            assert results == [[True, False]] * 10

    uvloop.run(go())
