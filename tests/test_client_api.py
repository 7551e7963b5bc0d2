"""MasterClient / AsyncMasterClient: same methods and return types as the in-process service,
the same exception type, and retries only where a retry is safe."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.client import AsyncMasterClient, MasterClient
from mooncake_redis.models import GetReplicaListResponse, PingResponse, ReplicaDescriptor
from mooncake_redis.radix import RadixNode, SubtreeResult
from mooncake_redis.server.app import ServerSettings, create_app
from tests.helpers import h, mha_keys
from tests.servers import free_port


def fake_config() -> Config:
    return Config(redis_url=f"fakeredis://{uuid.uuid4().hex}", enable_radix_tree=True, num_shards=8)


@pytest.fixture
async def pair() -> AsyncIterator[tuple[AsyncMasterClient, MasterService]]:
    """A client over HTTP and an in-process service on the same embedded store."""
    cfg = fake_config()
    app = create_app(ServerSettings(config=cfg, fsck_interval_s=0, evictor="off"))
    async with app.router.lifespan_context(app):
        svc = await MasterService.from_url(cfg.redis_url, cfg)
        client = AsyncMasterClient("http://worker", transport=httpx.ASGITransport(app))
        try:
            yield client, svc
        finally:
            await client.aclose()
            await svc.aclose()


async def test_async_client_matches_the_service(
    pair: tuple[AsyncMasterClient, MasterService],
) -> None:
    c, svc = pair
    seg = {"id": "seg-1", "name": "seg-1", "base": 1 << 30, "size": 1 << 20}
    await c.mount_segment(seg, "client-a")
    await c.remount_segment([seg], "client-a")
    assert isinstance(await c.ping("client-a"), PingResponse)
    assert await c.ping("client-a") == await svc.ping("client-a")
    root, child = h("root"), h("child")
    reps = await c.put_start("client-a", root + "_0_k", [512], {"replica_num": 1})
    assert isinstance(reps, list) and isinstance(reps[0], ReplicaDescriptor)
    assert reps[0].buffer_address == (1 << 30) + reps[0].offset
    await c.put_end("client-a", root + "_0_k")
    batch = await c.batch_put_start(
        "client-a",
        [child + "_0_k", ""],
        [256, 256],
        {"parent_block_hash": root},
    )
    assert isinstance(batch[0], list) and isinstance(batch[1], MooncakeError)
    assert batch[1].code == ErrorCode.INVALID_PARAMS
    assert await c.batch_put_end("client-a", [child + "_0_k"]) == [None]
    ends = await c.batch_put_end("client-a", ["missing"])
    assert isinstance(ends[0], MooncakeError) and ends[0].code == ErrorCode.OBJECT_NOT_FOUND
    # Reads: same values and types through HTTP and in process.
    got = await c.get_replica_list(root + "_0_k")
    assert isinstance(got, GetReplicaListResponse)
    assert got == await svc.get_replica_list(root + "_0_k")
    assert await c.exist_key(root + "_0_k") is True
    assert await c.batch_exist_key([root + "_0_k", "nope"]) == [True, False]
    many = await c.batch_get_replica_list([root + "_0_k", "nope"])
    assert many[0] == got and isinstance(many[1], MooncakeError)
    node = await c.get_keys_by_prefix(root)
    assert isinstance(node, RadixNode) and node == await svc.get_keys_by_prefix(root)
    assert node.children == [child] and node.child_generations
    sub = await c.get_subtree_keys(root, 2)
    assert isinstance(sub, SubtreeResult) and sub == await svc.get_subtree_keys(root, 2)
    # Registration (Path B) and unregistration.
    other = h("other")
    await c.register_radix_tree_node(other, "", mha_keys(other, 2))
    res = await c.batch_register_radix_tree_node(
        [(h("x"), other, [h("x")]), {"prefix_hash": h("y"), "parent_prefix_hash": h("y"),
                                      "keys": [h("y")]}]
    )  # fmt: skip
    assert res[0] is None and isinstance(res[1], MooncakeError)
    assert await c.unregister_radix_tree_keys(iter([h("x")])) == 1
    # Errors raise the library's exception type with its code.
    with pytest.raises(MooncakeError) as exc:
        await c.get_replica_list("nope")
    assert exc.value.code == ErrorCode.OBJECT_NOT_FOUND
    with pytest.raises(MooncakeError) as exc:
        await c.remove(root + "_0_k")
    assert exc.value.code == ErrorCode.OBJECT_HAS_LEASE
    with pytest.raises(MooncakeError) as exc:
        await c.put_revoke("client-b", child + "_0_k")
    assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    assert await c.batch_remove([root + "_0_k"], force=True) == [None]
    assert await c.remove_by_regex("^nothing", force=True) == 0
    assert await c.remove_all(force=True) >= 1
    result = await c.evict_once(force=True)
    assert result.reason and result.evicted_objects >= 0
    await c.unmount_segment("seg-1", "client-a")
    assert await c.health() and await c.ready() and "master_" in await c.metrics()


class LiveServer:
    """A real uvicorn server in a thread (embedded store), for the sync client."""

    def __init__(self, settings: ServerSettings) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live() -> Iterator[LiveServer]:
    settings = ServerSettings(config=fake_config(), fsck_interval_s=0, evictor="off", token="t0k")
    with LiveServer(settings) as server:
        yield server


def test_sync_client_over_a_real_socket(live: LiveServer) -> None:
    with MasterClient(live.url, token="t0k") as c:
        c.mount_segment({"id": "s", "size": 4096}, "cl")
        [reps] = c.batch_put_start("cl", ["k1"], [100])
        assert isinstance(reps, list) and reps[0].size == 100
        assert c.batch_put_end("cl", ["k1"]) == [None]
        assert c.exist_key("k1") is True
        assert c.batch_exist_key(["k1", "k2"]) == [True, False]
        assert c.get_replica_list("k1").replicas[0].status == "COMPLETE"
        with pytest.raises(MooncakeError) as exc:
            c.put_start("cl", "k1", 10)
        assert exc.value.code == ErrorCode.OBJECT_ALREADY_EXISTS
        assert "t0k" not in repr(c)
    with MasterClient(live.url, token="wrong") as bad, pytest.raises(MooncakeError) as exc:
        bad.exist_key("k1")
    assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    # Several URLs: a dead one is skipped (nothing was sent there).
    dead = f"http://127.0.0.1:{free_port()}"
    with MasterClient([dead, live.url, dead], token="t0k", backoff_s=0.001) as c:
        for _ in range(5):
            assert c.exist_key("k1") is True


class Flaky:
    """A transport that fails the first ``n`` requests with ``exc`` and counts every call."""

    def __init__(self, exc: type[Exception], n: int, status: int = 200) -> None:
        self.exc, self.n, self.status, self.calls = exc, n, status, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.n:
            if self.exc is httpx.HTTPStatusError:
                body = {"error": {"code": -900, "name": "RPC_FAIL", "message": "redis down"}}
                return httpx.Response(503, json=body)
            raise self.exc("boom", request=request)
        if request.url.path.endswith("batch_exist_key"):
            return httpx.Response(200, json={"results": [{"result": True}]})
        return httpx.Response(200, json={"result": None})


@pytest.mark.parametrize(
    ("exc", "rpc", "retried"),
    [
        (httpx.ConnectError, "remove", True),  # nothing sent: any RPC
        (httpx.ConnectTimeout, "put_revoke", True),
        (httpx.ReadTimeout, "batch_exist_key", True),  # idempotent read
        (httpx.RemoteProtocolError, "put_end", True),  # idempotent write
        (httpx.ReadTimeout, "remove", False),  # may have been applied
        (httpx.RemoteProtocolError, "put_revoke", False),
        (httpx.HTTPStatusError, "batch_exist_key", True),  # 503 on a read
        (httpx.HTTPStatusError, "remove", False),  # 503 on a write: the caller decides
    ],
)
def test_retry_policy(exc: type[Exception], rpc: str, retried: bool) -> None:
    flaky = Flaky(exc, 1)
    c = MasterClient("http://w", transport=httpx.MockTransport(flaky), backoff_s=0.0)
    args: dict[str, Any] = {
        "remove": {"key": "k"},
        "put_revoke": {"client_id": "c", "key": "k"},
        "put_end": {"client_id": "c", "key": "k"},
        "batch_exist_key": {"keys": ["k"]},
    }[rpc]
    if retried:
        getattr(c, rpc)(**args)
        assert flaky.calls == 2
    else:
        with pytest.raises(MooncakeError) as err:
            getattr(c, rpc)(**args)
        assert err.value.code == ErrorCode.RPC_FAIL and flaky.calls == 1
    c.close()


def test_retries_are_bounded() -> None:
    flaky = Flaky(httpx.ConnectError, 100)
    c = MasterClient("http://w", transport=httpx.MockTransport(flaky), retries=2, backoff_s=0.0)
    with pytest.raises(MooncakeError) as err:
        c.exist_key("k")
    assert err.value.code == ErrorCode.RPC_FAIL and flaky.calls == 3
    c.close()


async def test_async_retry_policy() -> None:
    flaky = Flaky(httpx.ReadTimeout, 1)

    async def handler(request: httpx.Request) -> httpx.Response:
        return flaky(request)

    c = AsyncMasterClient("http://w", transport=httpx.MockTransport(handler), backoff_s=0.0)
    assert await c.batch_exist_key(["k"]) == [True] and flaky.calls == 2
    flaky.calls, flaky.n = 0, 1
    with pytest.raises(MooncakeError):
        await c.put_start("c", "k", 10)
    assert flaky.calls == 1
    await c.aclose()


async def test_client_splits_batches_larger_than_a_worker_accepts(
    pair: tuple[AsyncMasterClient, MasterService],
) -> None:
    """A worker refuses more than 8,192 items per request; the client sends larger batches in
    parts, in order, and answers as one call: one result per key, counts summed."""
    c, _svc = pair
    await c.mount_segment({"id": "big", "name": "big", "base": 1 << 30, "size": 1 << 28}, "cl")
    keys = [f"bulk-{i}" for i in range(8_192 + 900)]  # two parts
    sizes = [[64] if i % 2 else 64 for i in range(len(keys))]  # parallel list split with keys
    started = await c.batch_put_start("cl", (k for k in keys), sizes)
    assert len(started) == len(keys)
    assert all(isinstance(r, list) and r[0].size == 64 for r in started)
    await c.ping("cl")  # the embedded store is slow: stay within the client TTL
    assert await c.batch_put_end("cl", keys) == [None] * len(keys)
    await c.ping("cl")
    exists = await c.batch_exist_key(keys + ["absent"])
    assert exists == [True] * len(keys) + [False]
    again = await c.batch_put_start("cl", keys[:3] + ["fresh"], [64] * 4)
    assert [getattr(r, "code", None) for r in again[:3]] == [ErrorCode.OBJECT_ALREADY_EXISTS] * 3
    assert isinstance(again[3], list)
    assert await c.batch_remove(keys[:8200], True) == [None] * 8200
    assert sum(await c.batch_exist_key(keys)) == len(keys) - 8200


def test_split_batch_keeps_single_calls_whole() -> None:
    from mooncake_redis.client.base import split_batch
    from mooncake_redis.server.schemas import RPCS

    args = {"keys": [str(i) for i in range(5)], "slice_lengths": [1] * 5, "config": None}
    parts = split_batch(RPCS["batch_put_start"], args, size=2)
    assert [p["keys"] for p in parts] == [["0", "1"], ["2", "3"], ["4"]]
    assert [p["slice_lengths"] for p in parts] == [[1, 1], [1, 1], [1]]
    assert all(p["config"] is None for p in parts)
    assert split_batch(RPCS["exist_key"], {"key": "k"}, size=1) == [{"key": "k"}]
    assert len(split_batch(RPCS["unregister_radix_tree_keys"], {"keys": ["a", "b"]}, 1)) == 2
