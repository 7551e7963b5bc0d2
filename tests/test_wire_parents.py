"""Parent inference (``wire_infer_parents``) on every backend: hints written by one worker's
exists are used by another worker's put, chains inside a batch, multi-key blocks, the put
guard's fallback, expiry, and nothing written when the flag is off."""

from __future__ import annotations

import asyncio
from typing import Any

from blake3 import blake3

from mooncake_redis.errors import ErrorCode
from mooncake_redis.wire.frontend import WireFrontend
from mooncake_redis.wire.parents import ParentHints
from mooncake_redis.wire.structpack import Err
from mooncake_redis.wire.types import UUID, ObjectMeta, ReplicateConfig, Segment

CLIENT = UUID(1, 2)
SEG = Segment(UUID(3, 4), "127.0.0.1:18390", 1 << 40, 1 << 24, "127.0.0.1:18390", "tcp", "")
D = "default"


def h(i: int) -> str:
    return blake3(f"block-{i}".encode()).hexdigest()


async def workers(make_service: Any, n: int = 2, ttl_ms: int = 60_000) -> list[WireFrontend]:
    out = []
    for _ in range(n):
        svc = await make_service(enable_radix_tree=True, wire_infer_parents=True)
        out.append(WireFrontend(svc, ParentHints(svc, ttl_ms)))
    await out[0].MountSegment((SEG, CLIENT))
    return out


async def put(fe: WireFrontend, keys: list[str]) -> list[Any]:
    res = await fe.BatchPutStart((CLIENT, keys, [64] * len(keys), ReplicateConfig(), D))
    ok = [k for k, r in zip(keys, res) if not isinstance(r, Err)]
    await fe.BatchPutEnd((CLIENT, [ObjectMeta(k) for k in ok], 4, D))
    return res


async def parent_of(fe: WireFrontend, block: str) -> str:
    return (await fe.svc.get_keys_by_prefix(block)).parent_prefix_hash


async def test_exists_on_one_worker_gives_the_parent_to_a_put_on_another(make_service: Any) -> None:
    a, b = await workers(make_service)
    blocks = [h(i) for i in range(6)]
    await put(a, blocks[:2])  # a stored prefix: 0 <- 1
    assert await parent_of(a, blocks[1]) == blocks[0]
    hits = await a.BatchExistKey((blocks, D))  # the whole path, as HiCache asks
    assert hits == [True, True, False, False, False, False]
    res = await put(b, blocks[2:])  # the missing suffix, through another worker
    assert not any(isinstance(r, Err) for r in res)
    for i in range(2, 6):
        assert await parent_of(b, blocks[i]) == blocks[i - 1]
    assert b.parents is not None and b.parents.inferred == 4


async def test_multi_key_blocks_chain_by_prefix(make_service: Any) -> None:
    (a,) = await workers(make_service, 1)
    blocks = [h(100 + i) for i in range(3)]
    keys = [f"{blk}_{r}_{kv}" for blk in blocks for r in range(2) for kv in "kv"]
    await a.BatchExistKey((keys, D))
    assert not any(isinstance(r, Err) for r in await put(a, keys[:4]))  # block 0, a root
    assert not any(isinstance(r, Err) for r in await put(a, keys[4:]))  # blocks 1, 2
    assert await parent_of(a, blocks[0]) == ""
    assert await parent_of(a, blocks[1]) == blocks[0]
    assert await parent_of(a, blocks[2]) == blocks[1]
    assert sorted((await a.svc.get_keys_by_prefix(blocks[2])).keys) == sorted(keys[8:])


async def test_without_an_exists_the_batch_alone_forms_the_chain(make_service: Any) -> None:
    (a,) = await workers(make_service, 1)
    blocks = [h(200 + i) for i in range(3)]
    await put(a, blocks)
    assert [await parent_of(a, b) for b in blocks] == ["", blocks[0], blocks[1]]


async def test_an_inferred_parent_that_is_not_stored_is_refused_like_an_explicit_one(
    make_service: Any,
) -> None:
    a, b = await workers(make_service)
    x, y, z = h(300), h(301), h(302)
    await a.BatchExistKey(([x, y, z], D))  # all miss: hints y <- x, z <- y
    res = await put(b, [y, z])  # x is not stored: the guard refuses y, rolls back z
    assert res[0] == Err(ErrorCode.OBJECT_NOT_FOUND) and isinstance(res[1], Err)
    assert await b.BatchExistKey(([y, z], D)) == [False, False]  # no orphan stored
    await put(a, [x])
    assert not any(isinstance(r, Err) for r in await put(b, [y, z]))
    assert await parent_of(b, y) == x and await parent_of(b, z) == y


async def test_hints_expire(make_service: Any) -> None:
    a, b = await workers(make_service, ttl_ms=300)
    p, c = h(400), h(401)
    await put(a, [p])
    await a.BatchExistKey(([p, c], D))
    await asyncio.sleep(0.6)
    await put(b, [c])
    assert await parent_of(b, c) == ""  # the hint was gone: a root


async def test_nothing_is_recorded_when_inference_is_off(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True)
    fe = WireFrontend(svc)
    await fe.MountSegment((SEG, CLIENT))
    blocks = [h(500), h(501)]
    await fe.BatchExistKey((blocks, D))
    await put(fe, [blocks[1]])
    assert await parent_of(fe, blocks[1]) == ""
    key = svc.keys.parent_hint(blocks[1])
    assert await svc.backend.client.exists(key) == 0
