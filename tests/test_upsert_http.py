"""Upsert through the HTTP API and the generated client: the same answers as the library
(in place, new size, preempted put, batch per key, errors with their Mooncake codes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.client import AsyncMasterClient
from mooncake_redis.server.app import ServerSettings, create_app
from tests.test_client_api import fake_config

C = "http-client"


@pytest.fixture
async def client() -> AsyncIterator[AsyncMasterClient]:
    cfg = fake_config()
    app = create_app(ServerSettings(config=cfg, fsck_interval_s=0, evictor="off"))
    async with app.router.lifespan_context(app):
        c = AsyncMasterClient("http://worker", transport=httpx.ASGITransport(app))
        try:
            await c.mount_segment({"id": "s0", "size": 1 << 20, "base": 1 << 40}, C)
            yield c
        finally:
            await c.aclose()


async def test_upsert_over_http(client: AsyncMasterClient) -> None:
    first = await client.upsert_start(C, "k", [100])  # absent: a put
    await client.upsert_end(C, "k")
    same = await client.upsert_start(C, "k", [100])
    assert same[0].buffer_address == first[0].buffer_address
    assert not await client.exist_key("k")
    await client.upsert_end(C, "k")
    bigger = await client.upsert_start(C, "k", 300)
    assert bigger[0].size == 300 and bigger[0].buffer_address != first[0].buffer_address
    await client.upsert_end(C, "k")
    assert (await client.get_replica_list("k")).replicas[0].size == 300
    await client.put_start("other", "busy", [50])
    res = await client.batch_upsert_start(C, ["k", "busy", ""], [[300], [50], [1]])
    assert isinstance(res[0], list) and isinstance(res[1], list)
    assert isinstance(res[2], MooncakeError) and res[2].code == ErrorCode.INVALID_PARAMS
    assert await client.batch_upsert_end(C, ["busy"]) == [None]
    assert await client.batch_upsert_revoke(C, ["k"]) == [None]
    assert await client.batch_exist_key(["k", "busy"]) == [False, True]
    with pytest.raises(MooncakeError) as e:
        await client.upsert_revoke(C, "k")
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    with pytest.raises(MooncakeError) as e:
        await client.upsert_start(C, "k", [0])
    assert e.value.code == ErrorCode.INVALID_PARAMS


def test_facade_has_every_upsert_rpc() -> None:
    for name in ("upsert_start", "upsert_end", "upsert_revoke"):
        assert callable(getattr(MasterService, name))
        assert callable(getattr(MasterService, "batch_" + name))
