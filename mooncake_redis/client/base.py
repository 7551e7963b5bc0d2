"""What both clients share: worker URLs, the retry policy, request and response bodies; and the
two call loops (blocking and asyncio) that drive a transport through that policy.

Retries are only where they are safe:
- any RPC is sent again when nothing was sent (:class:`.NotSent`: no connection could be made),
  to the next worker URL if several were given;
- idempotent RPCs (the ``idempotent`` column of :data:`~mooncake_redis.server.schemas.RPCS`:
  reads, exists, mount, put_end, register) also after a timeout, a dropped connection or a
  502/503/504 (Redis unavailable);
- a non-idempotent write (put_start, put_revoke, remove...) is never sent again once it may have
  reached a worker: the caller gets ``RPC_FAIL`` (or the worker's error) and decides.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ..errors import ErrorCode, MooncakeError
from ..server.bodies import MAX_BATCH
from ..server.schemas import Rpc, error_from_body
from .http11 import Origin
from .transport import (
    AsyncTransport,
    MaybeSent,
    NotSent,
    Options,
    SyncTransport,
    TransportError,
)

if TYPE_CHECKING:
    import httpx

    from .httpx_transport import HttpxAsyncTransport, HttpxSyncTransport

RETRY_STATUSES = frozenset({502, 503, 504})
_S = TypeVar("_S", bound="SyncClient")
_A = TypeVar("_A", bound="AsyncClient")
KEEPALIVE_S = 2.0  # shorter than the server's keep-alive (uvicorn: 5 s; `serve`: 30 s)


def _split_urls(url: str | Sequence[str]) -> list[Origin]:
    urls = [u.strip() for u in (url.split(",") if isinstance(url, str) else url)]
    origins = [Origin.parse(u) for u in urls if u]
    if not origins:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, "url: at least one worker URL")
    return origins


def _json_default(value: Any) -> Any:
    """What orjson does not serialize itself (it does dataclasses, tuples, dicts, lists)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        return list(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def _items(value: Any) -> Any:
    """A batch argument as a list (callers may pass any iterable); anything else as it is."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        return value
    return value if isinstance(value, list) else list(value)


def split_batch(rpc: Rpc, args: dict[str, Any], size: int = MAX_BATCH) -> list[dict[str, Any]]:
    """A call whose ``keys`` (or ``items``) list is longer than a worker accepts, as calls of at
    most ``size`` items each: every argument that runs parallel to the items (slice lengths, a
    config per key) is split with them. Any other call comes back whole."""
    field = "items" if "items" in args else "keys" if "keys" in args else None
    if field is None or not (rpc.batch or rpc.result is int):
        return [args]
    args = {k: _items(v) for k, v in args.items()}
    n = len(args[field])
    if n <= size:
        return [args]
    parallel = [k for k, v in args.items() if isinstance(v, list) and len(v) == n]
    return [{**args, **{k: args[k][i : i + size] for k in parallel}} for i in range(0, n, size)]


def join_results(rpc: Rpc, parts: list[dict[str, Any]], results: list[Any]) -> Any:
    """The answers of the calls :func:`split_batch` made, as the one call's answer: a batch's
    per-item lists in order (a part that failed as a whole fails each of its items), counts
    summed."""
    if not rpc.batch:
        for result in results:
            if isinstance(result, MooncakeError):
                raise result
        return sum(results)
    field = "items" if "items" in parts[0] else "keys"
    joined: list[Any] = []
    for part, result in zip(parts, results, strict=True):
        joined.extend(result if isinstance(result, list) else [result] * len(part[field]))
    return joined


class ClientBase:
    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 2.0,
        retries: int = 3,
        backoff_s: float = 0.05,
        max_connections: int = 64,
    ) -> None:
        self.origins = _split_urls(url)
        self.urls = [o.url for o in self.origins]
        self._next = random.randrange(len(self.origins))
        self.retries = max(0, retries)
        self.resent = 0
        """Calls sent again after an attempt that may have been applied (idempotent RPCs only):
        a caller that sees e.g. OBJECT_NOT_FOUND from a resent put_end knows the first attempt
        may have completed the object (and eviction taken it since)."""
        self.backoff_s = backoff_s
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.options = Options(self.headers, timeout, connect_timeout, KEEPALIVE_S, max_connections)

    def __repr__(self) -> str:  # no token
        return f"{type(self).__name__}({self.urls!r})"

    def _origin(self, rotate: bool) -> Origin:
        if rotate:
            self._next = (self._next + 1) % len(self.origins)
        return self.origins[self._next]

    @staticmethod
    def _encode(rpc: Rpc, args: dict[str, Any]) -> bytes:
        if rpc.prepare is not None:
            args = rpc.prepare(args)
        try:
            return orjson.dumps(args, default=_json_default)
        except TypeError as exc:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"{rpc.name}: {exc}") from exc

    @staticmethod
    def _decode(rpc: Rpc, status: int, data: bytes) -> Any:
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            body = None
        if status == 200 and isinstance(body, dict):
            return rpc.decode(body)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            raise error_from_body(body["error"])
        raise MooncakeError(ErrorCode.RPC_FAIL, f"{rpc.name}: HTTP {status}")

    def _again(self, rpc: Rpc, attempt: int, outcome: TransportError | int) -> bool:
        """The retry policy: may this call be sent again after ``outcome`` (a transport
        failure, or the HTTP status it got)?"""
        if attempt >= self.retries:
            return False
        if isinstance(outcome, NotSent):
            return True
        if rpc.idempotent and (isinstance(outcome, MaybeSent) or outcome in RETRY_STATUSES):
            self.resent += 1
            return True
        return False

    def _delay(self, attempt: int) -> float:
        return float(self.backoff_s * (2**attempt) * (0.5 + random.random()))

    @staticmethod
    def _failed(what: str, exc: TransportError) -> MooncakeError:
        return MooncakeError(ErrorCode.RPC_FAIL, f"{what}: {exc}")


class SyncClient(ClientBase):
    """The blocking call loop. Thread-safe: each call takes its own connection."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        transport: httpx.BaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url, **kwargs)
        self._http: SyncTransport | HttpxSyncTransport
        if transport is None:
            self._http = SyncTransport(self.options)
        else:
            from .httpx_transport import HttpxSyncTransport

            self._http = HttpxSyncTransport(transport, self.options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, rpc: Rpc, args: dict[str, Any]) -> Any:
        parts = split_batch(rpc, args)
        if len(parts) == 1:
            return self._call_one(rpc, parts[0])
        results: list[Any] = []
        for part in parts:
            try:
                results.append(self._call_one(rpc, part))
            except MooncakeError as exc:
                results.append(exc)
        return join_results(rpc, parts, results)

    def _call_one(self, rpc: Rpc, args: dict[str, Any]) -> Any:
        body = self._encode(rpc, args)
        for attempt in range(self.retries + 1):
            try:
                status, data = self._http.request(self._origin(attempt > 0), "POST", rpc.path, body)
            except TransportError as exc:
                if not self._again(rpc, attempt, exc):
                    raise self._failed(rpc.name, exc) from exc
            else:
                if not self._again(rpc, attempt, status):
                    return self._decode(rpc, status, data)
            time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def _get(self, path: str) -> tuple[int, bytes]:
        try:
            return self._http.request(self._origin(False), "GET", path)
        except TransportError as exc:
            raise self._failed(path, exc) from exc

    def health(self) -> bool:
        return self._get("/health")[0] == 200

    def ready(self) -> bool:
        return self._get("/ready")[0] == 200

    def metrics(self) -> str:
        return self._get("/metrics")[1].decode()


class AsyncClient(ClientBase):
    """The asyncio call loop (one event loop at a time)."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url, **kwargs)
        self._http: AsyncTransport | HttpxAsyncTransport
        if transport is None:
            self._http = AsyncTransport(self.options)
        else:
            from .httpx_transport import HttpxAsyncTransport

            self._http = HttpxAsyncTransport(transport, self.options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self: _A) -> _A:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, rpc: Rpc, args: dict[str, Any]) -> Any:
        parts = split_batch(rpc, args)
        if len(parts) == 1:
            return await self._call_one(rpc, parts[0])
        results: list[Any] = []
        for part in parts:  # in order: a later part may hold the children of an earlier one
            try:
                results.append(await self._call_one(rpc, part))
            except MooncakeError as exc:
                results.append(exc)
        return join_results(rpc, parts, results)

    async def _call_one(self, rpc: Rpc, args: dict[str, Any]) -> Any:
        body = self._encode(rpc, args)
        for attempt in range(self.retries + 1):
            try:
                origin = self._origin(attempt > 0)
                status, data = await self._http.request(origin, "POST", rpc.path, body)
            except TransportError as exc:
                if not self._again(rpc, attempt, exc):
                    raise self._failed(rpc.name, exc) from exc
            else:
                if not self._again(rpc, attempt, status):
                    return self._decode(rpc, status, data)
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    async def _get(self, path: str) -> tuple[int, bytes]:
        try:
            return await self._http.request(self._origin(False), "GET", path)
        except TransportError as exc:
            raise self._failed(path, exc) from exc

    async def health(self) -> bool:
        return (await self._get("/health"))[0] == 200

    async def ready(self) -> bool:
        return (await self._get("/ready"))[0] == 200

    async def metrics(self) -> str:
        return (await self._get("/metrics"))[1].decode()
