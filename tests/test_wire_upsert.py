"""Phase B over the wire, raw frames against a WireServer: Upsert* served by the store's upsert
(Mooncake's cases), and ``tenant_id`` as part of the object's identity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.errors import ErrorCode
from mooncake_redis.wire.server import WireServer
from mooncake_redis.wire.structpack import Err
from mooncake_redis.wire.types import ObjectMeta, ReplicateConfig
from tests.test_wire_server import ALL, CLIENT, SEG, D, start
from tests.wire_helpers import RawClient

BAD = Err(ErrorCode.INVALID_PARAMS)


@pytest.fixture
async def wire(fake_service: MasterService) -> AsyncIterator[RawClient]:
    server: WireServer = await start(fake_service)
    client = await RawClient.connect(server.port)
    assert await client.call("MountSegment", (SEG, CLIENT)) is None
    yield client
    await client.close()
    await server.stop(1)


@pytest.fixture
async def fake_service() -> AsyncIterator[MasterService]:
    import uuid

    from mooncake_redis import Config

    svc = await MasterService.from_url(
        f"fakeredis://{uuid.uuid4().hex}", Config(enable_radix_tree=True, num_shards=8)
    )
    yield svc
    await svc.aclose()


def addr(reps: Any) -> int:
    return int(reps[0].descriptor_variant.buffer_descriptor.buffer_address)


def size(reps: Any) -> int:
    return int(reps[0].descriptor_variant.buffer_descriptor.size)


async def put(c: RawClient, key: str, n: int, tenant: str = D, rpc: str = "Put") -> Any:
    r = await c.call(f"{rpc}Start", (CLIENT, key, n, ReplicateConfig(), tenant))
    assert not isinstance(r, Err), r
    assert await c.call(f"{rpc}End", (CLIENT, ObjectMeta(key), ALL, tenant)) is None
    return r


async def test_upsert_rpcs(wire: RawClient) -> None:
    c = wire
    first = await put(c, "k", 64, rpc="Upsert")  # absent: a put
    assert size((await c.call("GetReplicaList", ("k", D))).replicas) == 64
    same = await c.call("UpsertStart", (CLIENT, "k", 64, ReplicateConfig(), D))
    assert addr(same) == addr(first) and same[0].status == 2  # PROCESSING, in place
    assert await c.call("ExistKey", ("k", D)) is False
    assert await c.call("GetReplicaList", ("k", D)) == Err(ErrorCode.REPLICA_IS_NOT_READY)
    assert await c.call("UpsertEnd", (CLIENT, ObjectMeta("k"), ALL, D)) is None
    other = await put(c, "k", 200, rpc="Upsert")
    assert size(other) == 200 and addr(other) != addr(first)
    res = await c.call(
        "BatchUpsertStart", (CLIENT, ["k", "new", ""], [200, 10, 1], ReplicateConfig(), D)
    )
    assert isinstance(res[0], list) and isinstance(res[1], list) and res[2] == BAD
    assert await c.call("BatchUpsertEnd", (CLIENT, [ObjectMeta("new")], D)) == [None]
    assert await c.call("BatchUpsertRevoke", (CLIENT, ["k", "absent"], D)) == [
        None,
        Err(ErrorCode.OBJECT_NOT_FOUND),
    ]
    assert await c.call("BatchExistKey", (["k", "new"], D)) == [False, True]
    assert await c.call("UpsertRevoke", (CLIENT, "k", ALL, D)) == Err(ErrorCode.OBJECT_NOT_FOUND)
    assert await c.call("UpsertStart", (CLIENT, "k", 0, ReplicateConfig(), D)) == BAD
    bad_tenant = ("BatchUpsertStart", (CLIENT, ["a", "b"], [8, 8], ReplicateConfig(), "_x"))
    assert await c.call(*bad_tenant) == [BAD, BAD]


async def test_tenants_are_separate(wire: RawClient) -> None:
    c = wire
    await put(c, "k", 10)
    await put(c, "k", 20, "t1")
    await put(c, "only-t1", 30, "t1")
    assert size((await c.call("GetReplicaList", ("k", D))).replicas) == 10
    assert size((await c.call("GetReplicaList", ("k", "t1"))).replicas) == 20
    assert await c.call("ExistKey", ("k", "t2")) is False
    assert await c.call("BatchExistKey", (["k", "only-t1"], D)) == [True, False]
    assert await c.call("BatchExistKey", (["k", "only-t1"], "t1")) == [True, True]
    assert await c.call("ExistKey", ("k", "")) is True  # "" is "default"
    found = await c.call("GetReplicaListByRegex", ("^", "t1"))
    assert sorted(found) == ["k", "only-t1"]
    assert sorted(await c.call("GetReplicaListByRegex", ("^", D))) == ["k"]
    # An upsert in one tenant leaves the other's object alone.
    await put(c, "k", 40, "t1", rpc="Upsert")
    assert size((await c.call("GetReplicaList", ("k", D))).replicas) == 10
    assert await c.call("RemoveByRegex", ("^k$", True, "t1")) == 1
    assert await c.call("ExistKey", ("k", D)) is True
    assert await c.call("RemoveAll", (True, D)) == 1
    assert await c.call("ExistKey", ("only-t1", "t1")) is True
    assert await c.call("RemoveAll", (True, "t1")) == 1
    for tenant in ("_reserved", "tab\there", "caf\u00e9"):
        assert await c.call("ExistKey", ("k", tenant)) == BAD
        assert await c.call("BatchExistKey", (["a", "b"], tenant)) == [BAD, BAD]
        assert await c.call("RemoveAll", (True, tenant)) == ErrorCode.INVALID_PARAMS  # a long
    assert await c.call("ExistKey", ("\0t1\0k", D)) == BAD  # a tenant key's form
    assert await c.call("ExistKey", ("a\0b", D)) is False  # a plain key
