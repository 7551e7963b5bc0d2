"""Redis connections (standalone, cluster, embedded fakeredis) and the script runner.

Scripts run by EVALSHA; on NOSCRIPT (after ``SCRIPT FLUSH``, a restart or a failover) the runner
falls back to EVAL, which also re-caches the script, so a running worker never breaks. On a
cluster, a batch is split per node: each call carries only keys of slots that node serves and is
sent there explicitly; a slot move (MOVED/ASK/TRYAGAIN) refreshes the map and regroups.

Redis errors become Mooncake codes here, in one place (:func:`map_redis_error`): unreachable is
RPC_FAIL, out of memory is NO_AVAILABLE_HANDLE (HTTP 507). A connection lost mid-call (after a
Redis restart every pooled connection is dead) drops the idle connections and resends the call
once when the step is idempotent (its header says so, or it writes nothing). A write on a
connection the server reset is a lost connection too, on every event loop (:func:`lost_transport`).
On a single Redis over plain TCP the scripts share one multiplexed connection
(:mod:`.script_channel`): the round trips are most of a worker's Python side.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    OutOfMemoryError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .connections import (
    FastConnection,
    TlsConnection,
    UnixConnection,
    drop_idle,
    drop_idle_on_node,
    lost_transport,
)
from .errors import ErrorCode, MooncakeError
from .lua_loader import LuaScript, load_all
from .script_channel import ScriptChannel

T = TypeVar("T")
_FAKE_SERVERS: dict[str, Any] = {}
_FAKE_LOCK = threading.Lock()


URL_SCHEMES = (
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "unix",
    "fakeredis",
    "fakeredis+tcp",
)


def check_url(url: str) -> str:
    """Refuses a malformed Redis URL instead of letting redis-py fall back to localhost:6379
    (``redis:/host:port``, one slash, parses as a path and used to do exactly that)."""

    def bad(why: str) -> MooncakeError:
        return MooncakeError(ErrorCode.INVALID_PARAMS, f"Redis URL {redact(url)!r}: {why}")

    if not isinstance(url, str) or "://" not in url:
        raise bad("expected scheme://..., e.g. redis://127.0.0.1:6379")
    parts = urlsplit(url)
    if parts.scheme not in URL_SCHEMES:
        raise bad(f"unsupported scheme {parts.scheme!r} (one of {', '.join(URL_SCHEMES)})")
    if parts.scheme == "fakeredis":
        return url
    if parts.scheme == "unix":
        if not parts.path or parts.netloc:
            raise bad("expected unix:///path/to/redis.sock")
        return url
    if not parts.hostname:
        raise bad("no host (expected redis://host:port[/db])")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise bad(f"bad port: {exc}") from None
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise bad(f"the path must be a database number, got {parts.path!r}")
    if path and "cluster" in parts.scheme and path != "0":
        raise bad("a cluster has only database 0")
    return url


def map_redis_error(exc: BaseException, what: str) -> MooncakeError | None:
    """The one mapping of a Redis failure to a Mooncake error (None: not a Redis failure)."""
    if isinstance(exc, MooncakeError):
        return exc
    if isinstance(exc, OutOfMemoryError) or (isinstance(exc, ResponseError) and _is_oom(exc)):
        # Redis refused a write before running it (a script's shebang makes it check).
        return MooncakeError(
            ErrorCode.NO_AVAILABLE_HANDLE,
            f"Redis is out of memory (maxmemory reached); {what} refused: {exc}",
        )
    if isinstance(
        exc, (RedisConnectionError, RedisTimeoutError, RedisClusterException, OSError)
    ) or lost_transport(exc):
        # Mooncake's code for "the master could not be reached". A timeout or a connection
        # lost mid-call leaves the outcome unknown: every step is atomic and safe to retry.
        return MooncakeError(
            ErrorCode.RPC_FAIL, f"Redis unavailable during {what}: {type(exc).__name__}: {exc}"
        )
    return None


def _is_oom(exc: BaseException) -> bool:
    return str(exc).startswith("OOM ") or "-OOM" in str(exc)


def redact(url: str) -> str:
    """The URL without its password, for logs and errors."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, user + host + port, parts.path, parts.query, parts.fragment))


def fake_server(name: str) -> Any:
    import fakeredis

    with _FAKE_LOCK:
        if name not in _FAKE_SERVERS:
            _FAKE_SERVERS[name] = fakeredis.FakeServer(version=(7, 0))
        return _FAKE_SERVERS[name]


class EmbeddedTcpServer:
    """The embedded store (fakeredis) on a loopback port, for worker processes that must share
    it; ``url`` is what they connect to. Serves from a thread until :meth:`close`."""

    def __init__(self) -> None:
        from fakeredis import TcpFakeServer

        self._server = TcpFakeServer(("127.0.0.1", 0), server_type="redis")
        self.port = int(self._server.server_address[1])
        self.url = f"fakeredis+tcp://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fakeredis-tcp", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Backend:
    """One Redis deployment as the service sees it."""

    def __init__(
        self,
        client: Any,
        *,
        cluster: bool,
        fake: bool,
        url: str,
        channel: ScriptChannel | None = None,
    ) -> None:
        self.client = client
        # The scripts' one multiplexed connection (plain TCP to a single Redis), else None:
        # they go through the client's pool like every other command.
        self.channel = channel
        self.cluster = cluster
        self.fake = fake
        self.url = url
        self.scripts: dict[str, LuaScript] = load_all()
        self._with_shebang = not fake
        # Set when this process finds the namespace recorded with other settings (Redis
        # restarted empty and another process recorded its own): every call is refused.
        self.refused: MooncakeError | None = None
        # Awaited when Redis refuses a write for lack of memory (the service raises the
        # durable eviction request); errors in it are ignored.
        self.on_oom: Callable[[], Awaitable[None]] | None = None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Backend:
        """``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` (``rediss+cluster://``),
        ``fakeredis://[name]`` for the embedded in-process store, or ``fakeredis+tcp://host:port``
        for an embedded store served over TCP to several processes."""
        scheme = urlsplit(check_url(url)).scheme
        opts = {"decode_responses": False, "health_check_interval": 0, **kwargs}
        if scheme == "fakeredis":
            import fakeredis

            name = urlsplit(url).netloc or "default"
            fake_client: Any = fakeredis.FakeAsyncRedis(server=fake_server(name), **opts)
            return cls(fake_client, cluster=False, fake=True, url=url)
        if scheme == "fakeredis+tcp":
            # A fakeredis TCP server (``embedded_tcp_server``): processes share the embedded
            # store; scripts go without the shebang, which fakeredis cannot parse.
            real = url.replace("fakeredis+tcp", "redis", 1)
            return cls(aioredis.Redis.from_url(real, **opts), cluster=False, fake=True, url=url)
        if scheme in ("redis+cluster", "rediss+cluster"):
            real = url.replace("+cluster", "", 1)
            opts.pop("health_check_interval", None)
            client = RedisCluster.from_url(real, connection_class=FastConnection, **opts)
            return cls(client, cluster=True, fake=False, url=url)
        if scheme in ("redis", "rediss"):
            pool = aioredis.ConnectionPool.from_url(url, **opts)
            # TLS keeps redis-py's packing (FastConnection is a TCP connection), unix too.
            pool.connection_class = FastConnection if scheme == "redis" else TlsConnection
            standalone = aioredis.Redis(connection_pool=pool)
            kw = pool.connection_kwargs
            channel = None
            if (
                scheme == "redis"
                and kw.get("socket_timeout") is None
                and not opts["decode_responses"]
            ):
                channel = ScriptChannel(
                    kw.get("host", "localhost"),
                    int(kw.get("port", 6379)),
                    db=int(kw.get("db", 0) or 0),
                    username=kw.get("username"),
                    password=kw.get("password"),
                    client_name=kw.get("client_name"),
                    connect_timeout=kw.get("socket_connect_timeout"),
                )
            return cls(standalone, cluster=False, fake=False, url=url, channel=channel)
        if scheme == "unix":
            unix = aioredis.from_url(url, **opts)
            unix.connection_pool.connection_class = UnixConnection
            return cls(unix, cluster=False, fake=False, url=url)
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS, f"unsupported Redis URL scheme: {redact(url)}"
        )

    async def connect(self) -> None:
        """Cluster clients need the slot map before the first grouped call."""
        if self.cluster:
            await self.client.initialize()

    async def aclose(self) -> None:
        if self.channel is not None:
            await self.channel.aclose()
        await self.client.aclose()

    # -- scripts ----------------------------------------------------------------------------
    async def call(
        self, name: str, keys: Sequence[str], args: Sequence[Any], node: Any = None
    ) -> Any:
        """Run one script. ``keys`` must be non-empty: cluster clients route keyless calls at
        random, and the shebang flags are only checked against declared keys."""
        if not keys:
            raise MooncakeError(ErrorCode.INTERNAL_ERROR, f"script {name} called with no keys")
        if self.refused is not None:
            raise self.refused
        script = self.scripts[name]
        sha = script.sha(self._with_shebang)
        extra: dict[str, Any] = {}
        if self.cluster:
            extra["target_nodes"] = node if node is not None else self.node_of(keys[0])

        send = self.channel.execute if self.channel is not None else self.client.execute_command

        async def run() -> Any:
            try:
                return await send("EVALSHA", sha, len(keys), *keys, *args, **extra)
            except NoScriptError:
                src = script.source(self._with_shebang)
                return await send("EVAL", src, len(keys), *keys, *args, **extra)

        return await self._mapped(name, run, script.idempotent, extra.get("target_nodes"))

    async def command(self, *args: Any, idempotent: bool = True, node: Any = None) -> Any:
        """A plain Redis command, with the error mapping and the resend of :meth:`call`."""
        if self.refused is not None:
            raise self.refused
        extra = {"target_nodes": node} if self.cluster and node is not None else {}

        async def run() -> Any:
            return await self.client.execute_command(*args, **extra)

        return await self._mapped(str(args[0]), run, idempotent, node)

    def pipeline(self) -> Any:
        """A non-transactional pipeline; run it with :meth:`execute` (the error mapping)."""
        return self.client.pipeline(transaction=False)

    async def execute(self, pipe: Any, what: str = "pipeline") -> list[Any]:
        """Runs a pipeline built on :meth:`pipeline`, mapping Redis errors (never resent: a
        pipeline that failed half way cannot be told apart from one that never ran)."""
        if self.refused is not None:
            raise self.refused
        result: list[Any] = await self._mapped(what, pipe.execute, False, None)
        return result

    async def info(self, section: str) -> list[dict[str, Any]]:
        """``INFO section`` of every primary (one dict per node), mapped like every call."""

        async def run() -> list[dict[str, Any]]:
            if self.cluster:
                raw = await self.client.info(section, target_nodes=self.client.get_primaries())
                return list(raw.values())
            return [await self.client.info(section)]

        result: list[dict[str, Any]] = await self._mapped(f"INFO {section}", run, True, None)
        return result

    async def _mapped(
        self, what: str, run: Callable[[], Awaitable[Any]], idempotent: bool, node: Any
    ) -> Any:
        try:
            try:
                return await run()
            except RedisConnectionError:
                if not idempotent:
                    raise
                # A lost connection: after a Redis restart every idle pooled connection is
                # dead too. Drop them, then resend this idempotent step once.
                await self._drop_idle_connections(node)
                return await run()
        except (MovedError, AskError, TryAgainError, ClusterDownError):
            raise  # per_node regroups these
        except Exception as exc:
            mapped = map_redis_error(exc, what)
            if mapped is None or mapped is exc:
                raise
            if mapped.code == ErrorCode.NO_AVAILABLE_HANDLE and self.on_oom is not None:
                with contextlib.suppress(Exception):
                    await self.on_oom()
            raise mapped from exc

    async def _drop_idle_connections(self, node: Any) -> None:
        """Disconnects the idle pooled connections, and only those (:mod:`.connections`)."""
        with contextlib.suppress(Exception):
            if self.cluster:
                nodes = [node] if isinstance(node, ClusterNode) else self.client.get_nodes()
                for n in nodes:
                    await drop_idle_on_node(n)
            elif not self.fake:
                if self.channel is not None:
                    self.channel.drop_if_idle()
                await drop_idle(self.client.connection_pool)

    async def load_scripts(self) -> None:
        """Preload every script (``/ready`` reports it); EVALSHA falls back anyway."""
        for script in self.scripts.values():
            src = script.source(self._with_shebang)
            if self.cluster:
                await self.client.script_load(src)  # redis-py sends it to every primary
            else:
                await self.client.script_load(src)

    # -- cluster grouping -------------------------------------------------------------------
    def node_of(self, key: str) -> ClusterNode:
        slot = self.client.keyslot(key)
        node: ClusterNode | None = self.client.nodes_manager.get_node_from_slot(slot)
        if node is None:
            raise MooncakeError(ErrorCode.RPC_FAIL, f"no cluster node serves slot {slot}")
        return node

    def group(self, anchors: Sequence[str]) -> list[tuple[Any, list[int]]]:
        """Indices of ``anchors`` grouped by the node that serves them (one group standalone)."""
        if not self.cluster:
            return [(None, list(range(len(anchors))))]
        groups: dict[str, tuple[Any, list[int]]] = {}
        for i, anchor in enumerate(anchors):
            node = self.node_of(anchor)
            groups.setdefault(node.name, (node, []))[1].append(i)
        return list(groups.values())

    async def per_node(
        self, anchors: Sequence[str], run: Callable[[Any, list[int]], Awaitable[T]]
    ) -> list[tuple[list[int], T]]:
        """Run ``run(node, indices)`` once per node group, concurrently.

        Only the groups that a slot move rejected (the server refuses those before running the
        script, so nothing was written) are regrouped and sent again.
        """
        todo = list(range(len(anchors)))
        done: list[tuple[list[int], T]] = []
        for attempt in range(6):
            groups = self.group([anchors[i] for i in todo])
            calls = [(node, [todo[j] for j in idx]) for node, idx in groups]
            results: list[Any]
            if len(calls) == 1:  # one node (standalone): no task, the same error handling
                try:
                    results = [await run(*calls[0])]
                except Exception as exc:
                    results = [exc]
            else:
                results = await asyncio.gather(
                    *(run(node, idx) for node, idx in calls), return_exceptions=True
                )
            retry: list[int] = []
            for (_, idx), res in zip(calls, results):
                if isinstance(res, (MovedError, AskError, TryAgainError, ClusterDownError)):
                    if not self.cluster or attempt == 5:
                        raise res
                    retry.extend(idx)
                elif isinstance(res, BaseException):
                    raise res
                else:
                    done.append((idx, res))
            if not retry:
                return done
            todo = sorted(retry)
            await asyncio.sleep(0.05 * (attempt + 1))
            await self.client.nodes_manager.initialize()
        raise AssertionError("unreachable")

    async def time_ms(self) -> int:
        sec, usec = await self.command("TIME")
        return int(sec) * 1000 + int(usec) // 1000
