"""Issue 14 item 1: 64-bit values survive exactly on every path (fakeredis, Redis, cluster).

Offsets, sizes, buffer addresses, segment bases and replica ids up to 2^64 - 1 must never pass
through a Lua number (a double: exact only below 2^53) or cjson (14 significant digits), nor a
ZSET score. Before the fix, an object at offset 2^53 + 1 read back at 2^53 (fakeredis) or at
...000 (cjson on Redis); the janitor then reclaimed the live buffer and fsck reported
``replica_unallocated``.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.server.app import ServerSettings, create_app
from tests.conftest import _cleanup
from tests.helpers import h

U64 = (1 << 64) - 1
# A segment whose last byte is at address 2^64 - 1, with a size that no double holds exactly.
SIZE = (1 << 63) + 12345
BASE = U64 - SIZE + 1
# Object sizes that no double holds exactly; together they fill the segment to its last byte.
SIZES = [(1 << 53) + 1, 3, (1 << 62) + 7, 5]
SIZES.append(SIZE - sum(SIZES))


async def fill(svc: MasterService) -> dict[str, tuple[int, int]]:
    """Puts one object per size (two by batch), returns key -> (offset, size) as put_start said."""
    await svc.mount_segment(Segment("big", "big", BASE, SIZE, "ep:1"), "c")
    keys = [h(f"u64-{i}") for i in range(len(SIZES))]
    out: dict[str, tuple[int, int]] = {}
    for key, size in zip(keys[:3], SIZES[:3]):
        [rep] = await svc.put_start("c", key, [size])
        out[key] = (rep.offset, rep.size)
    res = await svc.batch_put_start("c", keys[3:], [[s] for s in SIZES[3:]])
    for key, r in zip(keys[3:], res):
        assert not isinstance(r, MooncakeError), r
        out[key] = (r[0].offset, r[0].size)
    assert await svc.batch_put_end("c", keys) == [None] * len(keys)
    return out


async def test_offsets_sizes_and_addresses_are_exact(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True)
    placed = await fill(svc)
    # Best fit from offset 0: the objects tile the segment in put order, exactly.
    expect, off = {}, 0
    for key, size in zip(placed, SIZES):
        expect[key] = (off, size)
        off += size
    assert placed == expect
    got = await svc.batch_get_replica_list(list(placed))
    for (key, (off, size)), r in zip(placed.items(), got):
        assert not isinstance(r, MooncakeError), r
        [rep] = r.replicas
        assert (rep.offset, rep.size, rep.buffer_address) == (off, size, BASE + off), key
    last = got[-1]
    assert not isinstance(last, MooncakeError)
    assert last.replicas[0].buffer_address + last.replicas[0].size - 1 == U64
    [st] = await svc.segment_stats(["big"])
    assert (st.size, st.allocated) == (SIZE, SIZE)
    # The janitor matches every allocation to its replica: nothing is reclaimed.
    svc2 = await make_service(
        enable_radix_tree=True, alloc_commit_deadline_ms=0, alloc_reclaim_grace_ms=1
    )
    rep = await svc2.run_janitor_once(force=True)
    assert rep.reclaimed_allocations == 0 and rep.confirmed_allocations == len(SIZES)
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]
    assert report.counts["capacity_bytes"] == SIZE and report.counts["allocated_bytes"] == SIZE
    # A full segment refuses the next put; a freed extent in the middle is reused exactly.
    with_room = h("u64-next")
    try:
        await svc.put_start("c", with_room, [1])
        raise AssertionError("a full segment accepted a put")
    except MooncakeError as exc:
        assert exc.code == ErrorCode.NO_AVAILABLE_HANDLE, exc
    second = list(placed)[1]
    await svc.remove(second, force=True)
    [rep2] = await svc.put_start("c", with_room, [3])
    assert rep2.offset == (1 << 53) + 1 and rep2.buffer_address == BASE + (1 << 53) + 1
    await svc.put_end("c", with_room)
    assert (await fsck(svc)).clean


async def test_eviction_and_unmount_with_u64_values(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0)
    placed = await fill(svc)
    res = await svc.evict_once(max_objects=2)
    assert res.evicted_objects >= 2
    gone = [k for k, r in zip(placed, await svc.batch_exist_key(list(placed))) if not r]
    assert res.bytes == sum(placed[k][1] for k in gone)
    assert (await fsck(svc)).clean
    await svc.unmount_segment("big", "c")
    assert await svc.segment_stats(["big"]) == []
    assert not any(await svc.batch_exist_key(list(placed)))
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]


async def test_replica_ids_are_exact_up_to_2_64(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True)
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    key = h("id-max")
    shard = svc.shard_of_key(key)
    n = svc.keys.num_shards
    # Replica id = counter * num_shards + shard: put the counter one below the largest value.
    top = (U64 - shard) // n
    await svc.backend.client.set(svc.keys.shard_key(shard, "seq"), top - 1)
    [rep] = await svc.put_start("c", key, [8])
    assert rep.replica_id == top * n + shard and rep.replica_id > U64 - n
    await svc.put_end("c", key)
    [got] = (await svc.get_replica_list(key)).replicas
    assert got.replica_id == rep.replica_id


async def test_sizes_past_2_64_are_refused(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True)
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    res = await svc.batch_put_start("c", [h("a"), h("b")], [[U64, 1], [1 << 64]])
    assert all(isinstance(r, MooncakeError) and r.code == ErrorCode.INVALID_PARAMS for r in res)
    try:
        await svc.mount_segment(Segment("t", "t", 1, U64 + 1), "c")
        raise AssertionError("a segment past 2^64 was mounted")
    except MooncakeError as exc:
        assert exc.code == ErrorCode.INVALID_PARAMS
    assert (await fsck(svc)).clean


async def test_http_json_keeps_u64_exact(backend_url: str) -> None:
    cfg = Config(
        redis_url=backend_url,
        namespace="t" + uuid.uuid4().hex[:12],
        enable_radix_tree=True,
        num_shards=8,
    )
    app = create_app(ServerSettings(config=cfg, fsck_interval_s=0, evictor="off"))
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app)
            async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
                seg = {"id": "big", "name": "big", "base": BASE, "size": SIZE}
                r = await c.post("/v1/mount_segment", json={"segment": seg, "client_id": "c"})
                assert r.status_code == 200, r.text
                keys = [h(f"http-{i}") for i in range(len(SIZES))]
                body = {
                    "client_id": "c",
                    "keys": keys,
                    "slice_lengths": [[s] for s in SIZES],
                    "config": ReplicateConfig().to_dict(),
                }
                r = await c.post("/v1/batch_put_start", json=body)
                assert r.status_code == 200, r.text
                r = await c.post("/v1/batch_put_end", json={"client_id": "c", "keys": keys})
                assert r.status_code == 200, r.text
                r = await c.post("/v1/batch_get_replica_list", json={"keys": keys})
                assert r.status_code == 200, r.text
                off = 0
                for size, item in zip(SIZES, r.json()["results"]):
                    [rep] = item["result"]["replicas"]
                    assert (rep["offset"], rep["size"]) == (off, size), item
                    assert rep["buffer_address"] == BASE + off
                    off += size
    finally:
        _cleanup(backend_url, cfg.namespace)
