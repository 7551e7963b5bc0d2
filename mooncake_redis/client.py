"""HTTP clients of the master workers: :class:`MasterClient` (sync) and :class:`AsyncMasterClient`.

Same method names, arguments and return types as :class:`~mooncake_redis.MasterService`; every
failure raises :class:`~mooncake_redis.MooncakeError` with the server's Mooncake error code
(transport failures are ``RPC_FAIL``). Connections are pooled (httpx) and kept alive for less
time than the server keeps them, so a request never races a server-side close.

Retries are only where they are safe:
- any RPC is retried when the connection could not be made (nothing was sent), trying the next
  worker URL if several were given;
- idempotent RPCs (reads, exists, mount, put_end, register; the ``idempotent`` column of
  :data:`~mooncake_redis.server.schemas.RPCS`) are also retried after a timeout, a dropped
  connection or a 503 (Redis unavailable);
- a non-idempotent write (put_start, put_revoke, remove...) is never sent again once it may have
  reached a worker: the caller gets ``RPC_FAIL`` and decides.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx
import orjson

from .errors import ErrorCode, MooncakeError
from .eviction.metrics import EvictionResult
from .models import (
    GetReplicaListResponse,
    PingResponse,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
)
from .radix import RadixNode, RegisterItem, SubtreeResult
from .server.schemas import RPCS, Rpc, error_from_body

ConfigArg = ReplicateConfig | Mapping[str, Any] | None

# Nothing was sent: safe to retry any RPC (on the next URL).
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Maybe sent, maybe applied: only idempotent RPCs are retried.
_MAYBE_SENT = (httpx.TransportError,)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value  # let the server refuse what it cannot read


def _register_item(item: Any) -> Any:
    if isinstance(item, (tuple, list)) and len(item) == 3:
        return {"prefix_hash": item[0], "parent_prefix_hash": item[1], "keys": list(item[2])}
    return item


def _split_urls(url: str | Sequence[str]) -> list[str]:
    urls = [u.strip().rstrip("/") for u in (url.split(",") if isinstance(url, str) else url)]
    urls = [u for u in urls if u]
    if not urls:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, "url: at least one worker URL")
    return urls


class _Common:
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
        self.urls = _split_urls(url)
        self._next = random.randrange(len(self.urls))
        self.retries = max(0, retries)
        self.resent = 0
        """Calls sent again after an attempt that may have been applied (idempotent RPCs only):
        a caller that sees e.g. OBJECT_NOT_FOUND from a resent put_end knows the first attempt
        may have completed the object (and eviction taken it since)."""
        self.backoff_s = backoff_s
        self.headers = {"content-type": "application/json"}
        if token:
            self.headers["authorization"] = f"Bearer {token}"
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=2.0,  # shorter than the server's keep-alive (uvicorn: 5 s or more)
        )

    def __repr__(self) -> str:  # no token
        return f"{type(self).__name__}({self.urls!r})"

    def _url(self, rotate: bool = False) -> str:
        if rotate:
            self._next = (self._next + 1) % len(self.urls)
        return self.urls[self._next]

    def _encode(self, kwargs: dict[str, Any]) -> bytes:
        return orjson.dumps(_jsonable(kwargs))

    def _delay(self, attempt: int) -> float:
        return float(self.backoff_s * (2**attempt) * (0.5 + random.random()))

    @staticmethod
    def _decode(rpc: Rpc, resp: httpx.Response) -> Any:
        try:
            body = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            body = None
        if resp.status_code == 200 and isinstance(body, dict):
            return rpc.decode(body)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            raise error_from_body(body["error"])
        raise MooncakeError(ErrorCode.RPC_FAIL, f"{rpc.name}: HTTP {resp.status_code}")

    def _retry_status(self, rpc: Rpc, resp: httpx.Response) -> bool:
        return rpc.idempotent and resp.status_code in (502, 503, 504)

    @staticmethod
    def _fail(rpc: Rpc, exc: Exception) -> MooncakeError:
        return MooncakeError(ErrorCode.RPC_FAIL, f"{rpc.name}: {type(exc).__name__}: {exc}")


class AsyncMasterClient(_Common):
    """Async client: ``async with AsyncMasterClient("http://127.0.0.1:50051") as c: ...``.

    ``url`` may list several workers (a sequence or comma-separated); connection failures move
    to the next one. ``transport`` is for tests (e.g. ``httpx.ASGITransport(app)``).
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url, **kwargs)
        self._http = httpx.AsyncClient(
            timeout=self.timeout, limits=self.limits, headers=self.headers, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMasterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _rpc(self, name: str, **kwargs: Any) -> Any:
        rpc = RPCS[name]
        body = self._encode(kwargs)
        rotate = False
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                resp = await self._http.post(self._url(rotate) + rpc.path, content=body)
            except _NOT_SENT as exc:
                if last:
                    raise self._fail(rpc, exc) from exc
                rotate = True
            except _MAYBE_SENT as exc:
                if last or not rpc.idempotent:
                    raise self._fail(rpc, exc) from exc
                rotate = True
                self.resent += 1
            else:
                if last or not self._retry_status(rpc, resp):
                    return self._decode(rpc, resp)
                rotate = True
                self.resent += 1
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    async def _get(self, path: str) -> httpx.Response:
        return await self._http.get(self._url() + path)

    async def health(self) -> bool:
        return (await self._get("/health")).status_code == 200

    async def ready(self) -> bool:
        return (await self._get("/ready")).status_code == 200

    async def metrics(self) -> str:
        return (await self._get("/metrics")).text

    # -- RPCs (same signatures as MasterService) --
    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        await self._rpc("mount_segment", segment=segment, client_id=client_id)

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        await self._rpc("remount_segment", segments=segments, client_id=client_id)

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        await self._rpc("unmount_segment", segment_id=segment_id, client_id=client_id)

    async def ping(self, client_id: str) -> PingResponse:
        result: PingResponse = await self._rpc("ping", client_id=client_id)
        return result

    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        result: list[ReplicaDescriptor] = await self._rpc(
            "put_start", client_id=client_id, key=key, slice_lengths=slice_lengths, config=config
        )
        return result

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        result: list[list[ReplicaDescriptor] | MooncakeError] = await self._rpc(
            "batch_put_start",
            client_id=client_id,
            keys=keys,
            slice_lengths=slice_lengths,
            config=config,
        )
        return result

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self._rpc("put_end", client_id=client_id, key=key, replica_type=replica_type)

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = await self._rpc(
            "batch_put_end", client_id=client_id, keys=keys, replica_type=replica_type
        )
        return result

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self._rpc("put_revoke", client_id=client_id, key=key, replica_type=replica_type)

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = await self._rpc(
            "batch_put_revoke", client_id=client_id, keys=keys, replica_type=replica_type
        )
        return result

    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        result: GetReplicaListResponse = await self._rpc("get_replica_list", key=key)
        return result

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        result: list[GetReplicaListResponse | MooncakeError] = await self._rpc(
            "batch_get_replica_list", keys=keys
        )
        return result

    async def exist_key(self, key: str) -> bool:
        result: bool = await self._rpc("exist_key", key=key)
        return result

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        result: list[bool | MooncakeError] = await self._rpc("batch_exist_key", keys=keys)
        return result

    async def remove(self, key: str, force: bool = False) -> None:
        await self._rpc("remove", key=key, force=force)

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = await self._rpc("batch_remove", keys=keys, force=force)
        return result

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        result: int = await self._rpc("remove_by_regex", pattern=pattern, force=force)
        return result

    async def remove_all(self, force: bool = False) -> int:
        result: int = await self._rpc("remove_all", force=force)
        return result

    async def register_radix_tree_node(
        self, prefix_hash: str, parent_prefix_hash: str, keys: Sequence[str]
    ) -> None:
        await self._rpc(
            "register_radix_tree_node",
            prefix_hash=prefix_hash,
            parent_prefix_hash=parent_prefix_hash,
            keys=keys,
        )

    async def batch_register_radix_tree_node(
        self, items: Sequence[RegisterItem | tuple[str, str, Sequence[str]] | Mapping[str, Any]]
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = await self._rpc(
            "batch_register_radix_tree_node", items=[_register_item(i) for i in items]
        )
        return result

    async def get_keys_by_prefix(self, prefix_hash: str) -> RadixNode:
        result: RadixNode = await self._rpc("get_keys_by_prefix", prefix_hash=prefix_hash)
        return result

    async def get_subtree_keys(self, prefix_hash: str, max_depth: int = 16) -> SubtreeResult:
        result: SubtreeResult = await self._rpc(
            "get_subtree_keys", prefix_hash=prefix_hash, max_depth=max_depth
        )
        return result

    async def unregister_radix_tree_keys(self, keys: Iterable[str]) -> int:
        result: int = await self._rpc("unregister_radix_tree_keys", keys=list(keys))
        return result

    async def evict_once(
        self,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        wait: bool = True,
    ) -> EvictionResult:
        result: EvictionResult = await self._rpc(
            "evict_once",
            force=force,
            max_objects=max_objects,
            target_ratio=target_ratio,
            wait=wait,
        )
        return result


class MasterClient(_Common):
    """Sync client with the same methods: ``with MasterClient(url) as c: c.exist_key(k)``.

    Thread-safe (one pooled httpx.Client).
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        transport: httpx.BaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url, **kwargs)
        self._http = httpx.Client(
            timeout=self.timeout, limits=self.limits, headers=self.headers, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MasterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rpc(self, name: str, **kwargs: Any) -> Any:
        rpc = RPCS[name]
        body = self._encode(kwargs)
        rotate = False
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                resp = self._http.post(self._url(rotate) + rpc.path, content=body)
            except _NOT_SENT as exc:
                if last:
                    raise self._fail(rpc, exc) from exc
                rotate = True
            except _MAYBE_SENT as exc:
                if last or not rpc.idempotent:
                    raise self._fail(rpc, exc) from exc
                rotate = True
                self.resent += 1
            else:
                if last or not self._retry_status(rpc, resp):
                    return self._decode(rpc, resp)
                rotate = True
                self.resent += 1
            time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def _get(self, path: str) -> httpx.Response:
        return self._http.get(self._url() + path)

    def health(self) -> bool:
        return self._get("/health").status_code == 200

    def ready(self) -> bool:
        return self._get("/ready").status_code == 200

    def metrics(self) -> str:
        return self._get("/metrics").text

    # -- RPCs (same signatures as MasterService) --

    def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        self._rpc("mount_segment", segment=segment, client_id=client_id)

    def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        self._rpc("remount_segment", segments=segments, client_id=client_id)

    def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        self._rpc("unmount_segment", segment_id=segment_id, client_id=client_id)

    def ping(self, client_id: str) -> PingResponse:
        result: PingResponse = self._rpc("ping", client_id=client_id)
        return result

    def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        result: list[ReplicaDescriptor] = self._rpc(
            "put_start", client_id=client_id, key=key, slice_lengths=slice_lengths, config=config
        )
        return result

    def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        result: list[list[ReplicaDescriptor] | MooncakeError] = self._rpc(
            "batch_put_start",
            client_id=client_id,
            keys=keys,
            slice_lengths=slice_lengths,
            config=config,
        )
        return result

    def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        self._rpc("put_end", client_id=client_id, key=key, replica_type=replica_type)

    def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = self._rpc(
            "batch_put_end", client_id=client_id, keys=keys, replica_type=replica_type
        )
        return result

    def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        self._rpc("put_revoke", client_id=client_id, key=key, replica_type=replica_type)

    def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = self._rpc(
            "batch_put_revoke", client_id=client_id, keys=keys, replica_type=replica_type
        )
        return result

    def get_replica_list(self, key: str) -> GetReplicaListResponse:
        result: GetReplicaListResponse = self._rpc("get_replica_list", key=key)
        return result

    def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        result: list[GetReplicaListResponse | MooncakeError] = self._rpc(
            "batch_get_replica_list", keys=keys
        )
        return result

    def exist_key(self, key: str) -> bool:
        result: bool = self._rpc("exist_key", key=key)
        return result

    def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        result: list[bool | MooncakeError] = self._rpc("batch_exist_key", keys=keys)
        return result

    def remove(self, key: str, force: bool = False) -> None:
        self._rpc("remove", key=key, force=force)

    def batch_remove(self, keys: Sequence[str], force: bool = False) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = self._rpc("batch_remove", keys=keys, force=force)
        return result

    def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        result: int = self._rpc("remove_by_regex", pattern=pattern, force=force)
        return result

    def remove_all(self, force: bool = False) -> int:
        result: int = self._rpc("remove_all", force=force)
        return result

    def register_radix_tree_node(
        self, prefix_hash: str, parent_prefix_hash: str, keys: Sequence[str]
    ) -> None:
        self._rpc(
            "register_radix_tree_node",
            prefix_hash=prefix_hash,
            parent_prefix_hash=parent_prefix_hash,
            keys=keys,
        )

    def batch_register_radix_tree_node(
        self, items: Sequence[RegisterItem | tuple[str, str, Sequence[str]] | Mapping[str, Any]]
    ) -> list[MooncakeError | None]:
        result: list[MooncakeError | None] = self._rpc(
            "batch_register_radix_tree_node", items=[_register_item(i) for i in items]
        )
        return result

    def get_keys_by_prefix(self, prefix_hash: str) -> RadixNode:
        result: RadixNode = self._rpc("get_keys_by_prefix", prefix_hash=prefix_hash)
        return result

    def get_subtree_keys(self, prefix_hash: str, max_depth: int = 16) -> SubtreeResult:
        result: SubtreeResult = self._rpc(
            "get_subtree_keys", prefix_hash=prefix_hash, max_depth=max_depth
        )
        return result

    def unregister_radix_tree_keys(self, keys: Iterable[str]) -> int:
        result: int = self._rpc("unregister_radix_tree_keys", keys=list(keys))
        return result

    def evict_once(
        self,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        wait: bool = True,
    ) -> EvictionResult:
        result: EvictionResult = self._rpc(
            "evict_once",
            force=force,
            max_objects=max_objects,
            target_ratio=target_ratio,
            wait=wait,
        )
        return result
