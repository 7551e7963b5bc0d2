"""Upsert's edge cases on three backends, each as Mooncake's master decides it
(mooncake-store/src/master_service.cpp ``MasterService::UpsertStart``): absent key (a put), same
size (in place), new size (fresh buffers, the old ones released later), a put or upsert in
progress (preempted at once), readers' leases (no obstacle), pins (kept), revoke, no space, and
the radix node of the key (kept)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis import lua_calls as lua
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig
from tests.helpers import h
from tests.test_store_basic import C, mounted, put, seg

RELEASE_MS = 150
CFG: dict[str, Any] = dict(
    enable_radix_tree=True,
    put_start_discard_timeout_ms=100,
    put_start_release_timeout_ms=RELEASE_MS,
)


async def svc_for(make_service: Any, **cfg: Any) -> MasterService:
    return await mounted(make_service, **{**CFG, **cfg})


async def upsert(svc: MasterService, key: str, size: int, client: str = C, **cfg: Any) -> Any:
    reps = await svc.upsert_start(client, key, [size], ReplicateConfig(**cfg))
    await svc.upsert_end(client, key)
    return reps


async def allocated(svc: MasterService) -> int:
    return sum(s.allocated for s in await svc.segment_stats())


async def obj_field(svc: MasterService, key: str, name: str) -> Any:
    shard = svc.shard_of_key(key)
    return await svc.backend.client.hget(svc.keys.obj(shard, key), name)


async def assert_clean(svc: MasterService) -> None:
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]


async def released(svc: MasterService) -> None:
    """Past the release timeout, the janitor hands discarded buffers back."""
    await asyncio.sleep(RELEASE_MS / 1000 + 0.1)
    await svc.run_janitor_once(force=True)


async def test_absent_key_is_a_put(make_service: Any) -> None:
    svc = await svc_for(make_service)
    reps = await svc.upsert_start(C, "k", [1000])
    assert [r.status for r in reps] == ["PROCESSING"] and reps[0].size == 1000
    assert not await svc.exist_key("k")
    with pytest.raises(MooncakeError) as e:
        await svc.get_replica_list("k")
    assert e.value.code == ErrorCode.REPLICA_IS_NOT_READY
    await svc.upsert_end(C, "k")
    got = await svc.get_replica_list("k")
    assert got.replicas[0].buffer_address == reps[0].buffer_address
    assert (await svc.shard_totals("objects"))["objects"] == 1
    await assert_clean(svc)


async def test_same_size_is_in_place(make_service: Any) -> None:
    svc = await svc_for(make_service)
    first = await put(svc, "k", 1000)
    used = await allocated(svc)
    reps = await svc.upsert_start("writer-2", "k", [1000])
    assert [(r.buffer_address, r.replica_id) for r in reps] == [
        (r.buffer_address, r.replica_id) for r in first
    ]
    assert reps[0].status == "PROCESSING"
    assert await allocated(svc) == used  # no allocation, no free
    assert not await svc.exist_key("k")  # unreadable until UpsertEnd
    with pytest.raises(MooncakeError) as e:
        await svc.get_replica_list("k")
    assert e.value.code == ErrorCode.REPLICA_IS_NOT_READY
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_end(C, "k")  # the upsert's client owns the object now
    assert e.value.code == ErrorCode.ILLEGAL_CLIENT
    await svc.upsert_end("writer-2", "k")
    got = await svc.get_replica_list("k")
    assert got.replicas[0].buffer_address == first[0].buffer_address
    assert got.replicas[0].status == "COMPLETE"
    assert (await svc.shard_totals("objects", "bytes")) == {"objects": 1, "bytes": 1000}
    await assert_clean(svc)


async def test_new_size_gets_new_buffers_old_released_later(make_service: Any) -> None:
    svc = await svc_for(make_service)
    first = await put(svc, "k", 1000)
    reps = await svc.upsert_start(C, "k", [3000])
    assert reps[0].size == 3000 and reps[0].buffer_address != first[0].buffer_address
    assert reps[0].replica_id != first[0].replica_id
    # The old buffer stays allocated until the release timeout (a reader may still read it).
    assert await allocated(svc) == 4000
    await svc.upsert_end(C, "k")
    assert (await svc.get_replica_list("k")).replicas[0].size == 3000
    assert (await svc.shard_totals("bytes"))["bytes"] == 3000
    await released(svc)
    assert await allocated(svc) == 3000
    await assert_clean(svc)


async def test_put_in_progress_is_preempted_at_once(make_service: Any) -> None:
    svc = await svc_for(make_service)
    old = await svc.put_start("writer-1", "k", [1000])
    reps = await svc.upsert_start("writer-2", "k", [1000])  # no discard timeout to wait for
    assert reps[0].buffer_address != old[0].buffer_address
    with pytest.raises(MooncakeError) as e:
        await svc.put_end("writer-1", "k")
    assert e.value.code == ErrorCode.ILLEGAL_CLIENT
    await svc.upsert_end("writer-2", "k")
    assert await svc.exist_key("k")
    assert (await svc.shard_totals("objects", "bytes")) == {"objects": 1, "bytes": 1000}
    await released(svc)
    assert await allocated(svc) == 1000
    await assert_clean(svc)


async def test_upsert_in_progress_is_preempted(make_service: Any) -> None:
    """An in-place upsert in progress has no COMPLETE replica left: the next upsert discards
    those buffers (the first writer may still be writing) and takes new ones."""
    svc = await svc_for(make_service)
    first = await put(svc, "k", 1000)
    await svc.upsert_start("writer-1", "k", [1000])
    reps = await svc.upsert_start("writer-2", "k", [1000])
    assert reps[0].buffer_address != first[0].buffer_address
    await svc.upsert_end("writer-2", "k")
    await released(svc)
    assert await allocated(svc) == 1000
    await assert_clean(svc)


@pytest.mark.parametrize("size", [1000, 2000])
async def test_reader_lease_does_not_block(make_service: Any, size: int) -> None:
    """Mooncake's upsert checks no lease (only replication refcounts, which this store has
    not); remove is what a lease refuses."""
    svc = await svc_for(make_service, default_kv_lease_ttl_ms=60_000)
    await put(svc, "k", 1000)
    await svc.get_replica_list("k")
    with pytest.raises(MooncakeError) as e:
        await svc.remove("k")
    assert e.value.code == ErrorCode.OBJECT_HAS_LEASE
    await upsert(svc, "k", size)
    assert (await svc.get_replica_list("k")).replicas[0].size == size
    await assert_clean(svc)


async def test_pins_survive(make_service: Any) -> None:
    svc = await svc_for(make_service)
    await put(svc, "hard", 1000, with_hard_pin=True)
    await upsert(svc, "hard", 1000)  # in place: the pin as it was
    assert await obj_field(svc, "hard", "hp") in ("1", b"1")
    await upsert(svc, "hard", 2000)  # new size: old pin or new
    assert await obj_field(svc, "hard", "hp") in ("1", b"1")
    await put(svc, "soft", 1000, with_soft_pin=True)
    await upsert(svc, "soft", 2000)
    assert await obj_field(svc, "soft", "sp") is not None
    await put(svc, "plain", 1000)
    await upsert(svc, "plain", 1000, with_hard_pin=True)  # in place: not newly pinned
    assert await obj_field(svc, "plain", "hp") is None
    await assert_clean(svc)


async def test_revoke_after_in_place_drops_object(make_service: Any) -> None:
    """UpsertRevoke is PutRevoke: the PROCESSING replicas go, and with them the object (its
    buffers may be half written)."""
    svc = await svc_for(make_service)
    await put(svc, "k", 1000)
    await svc.upsert_start(C, "k", [1000])
    await svc.upsert_revoke(C, "k")
    assert not await svc.exist_key("k")
    assert await allocated(svc) == 0
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_revoke(C, "k")
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    await assert_clean(svc)


async def test_no_space_and_too_big_leave_the_object(make_service: Any) -> None:
    svc = await svc_for(make_service, n=1)
    first = await put(svc, "k", 1000)
    await put(svc, "fill", (1 << 20) - 1000)
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_start(C, "k", [5000])
    assert e.value.code == ErrorCode.NO_AVAILABLE_HANDLE
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_start(C, "k", [2 << 20])
    assert e.value.code == ErrorCode.INVALID_PARAMS
    got = await svc.get_replica_list("k")  # untouched, still COMPLETE
    assert got.replicas[0].buffer_address == first[0].buffer_address
    await upsert(svc, "k", 1000)  # in place needs no space
    await assert_clean(svc)


async def test_batch_mixes_every_case(make_service: Any) -> None:
    svc = await svc_for(make_service)
    await put(svc, "same", 1000)
    await put(svc, "other", 1000)
    await svc.put_start("writer-1", "busy", [1000])
    keys = ["same", "other", "busy", "new", ""]
    res = await svc.batch_upsert_start(C, keys, [[1000], [500], [1000], [700], [10]])
    assert isinstance(res[4], MooncakeError) and res[4].code == ErrorCode.INVALID_PARAMS
    sizes = [r[0].size for r in res[:4] if not isinstance(r, MooncakeError)]
    assert sizes == [1000, 500, 1000, 700]
    assert await svc.batch_upsert_end(C, keys[:4]) == [None] * 4
    assert await svc.batch_exist_key(keys[:4]) == [True] * 4
    assert (await svc.shard_totals("objects"))["objects"] == 4
    res2 = await svc.batch_upsert_start(C, ["same", "new"], [[1000], [700]])
    rv = await svc.batch_upsert_revoke(C, ["same", "new", "absent"])
    assert rv[:2] == [None, None]
    assert isinstance(rv[2], MooncakeError) and rv[2].code == ErrorCode.OBJECT_NOT_FOUND
    assert not any(isinstance(r, MooncakeError) for r in res2)
    assert await svc.batch_exist_key(["same", "new", "other"]) == [False, False, True]
    await released(svc)
    await assert_clean(svc)


async def test_radix_node_kept_and_new_key_guarded(make_service: Any) -> None:
    svc = await svc_for(make_service)
    root, child, orphan = h("root"), h("child"), h("orphan")
    await put(svc, root, 1000)
    await put(svc, child, 1000, parent_block_hash=root)
    before = await svc.get_keys_by_prefix(child)
    await upsert(svc, child, 1000)
    await upsert(svc, child, 4000)  # new buffers, same node, same parent
    after = await svc.get_keys_by_prefix(child)
    assert (
        (after.parent_prefix_hash, after.keys)
        == (before.parent_prefix_hash, before.keys)
        == (root, [child])
    )
    assert (await svc.get_keys_by_prefix(root)).children == [child]
    # A new key is a put: the radix put guard refuses a parent that is not stored.
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_start(C, orphan, [100], ReplicateConfig(parent_block_hash=h("nope")))
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    await upsert(svc, h("leaf"), 100, parent_block_hash=child)
    assert (await svc.get_keys_by_prefix(h("leaf"))).parent_prefix_hash == child
    await released(svc)
    await assert_clean(svc)


async def test_stale_in_place_upsert_is_discarded_by_janitor(make_service: Any) -> None:
    """A writer that dies after UpsertStart: the object is a stale put (Mooncake discards it
    the same way); its buffers come back after the release timeout."""
    svc = await svc_for(make_service)
    await put(svc, "k", 1000)
    await svc.upsert_start(C, "k", [1000])
    await asyncio.sleep(0.15)
    await svc.run_janitor_once(force=True)
    assert not await svc.exist_key("k")
    await released(svc)
    assert await allocated(svc) == 0
    await assert_clean(svc)


async def test_bad_inputs(make_service: Any) -> None:
    svc = await svc_for(make_service)
    for args in ((C, "k", [0]), ("", "k", [10]), (C, "k", [])):
        with pytest.raises(MooncakeError) as e:
            await svc.upsert_start(*args)  # type: ignore[arg-type]
        assert e.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(MooncakeError):
        await svc.batch_upsert_start(C, ["a", "b"], [[1]])
    with pytest.raises(MooncakeError) as e:
        await svc.upsert_end(C, "absent")
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    await svc.mount_segment(seg(5), C)
    await assert_clean(svc)


async def test_resent_commit_answers_again(make_service: Any) -> None:
    """A resent upsert_start script call (same put id: its first reply was lost) changes
    nothing and answers the replicas it wrote."""
    svc = await svc_for(make_service)
    await put(svc, "k", 1000)
    commit = lua.UpsertCommit(svc.shard_of_key("k"), "k", "pid-1", C, 1000, False, False, [])
    [a] = await lua.upsert_start(svc.ctx, [commit])
    [b] = await lua.upsert_start(svc.ctx, [commit])
    assert [a.mode, b.mode] == ["inplace", "again"] and a.replicas == b.replicas
    await svc.upsert_end(C, "k")
    await assert_clean(svc)


async def test_key_created_by_a_concurrent_put_is_upserted(make_service: Any) -> None:
    """Absent when looked at, then put by another worker before this upsert's put commits:
    the put answers OBJECT_ALREADY_EXISTS and the upsert starts over on the existing key."""
    svc = await svc_for(make_service)
    other: MasterService = await make_service(**CFG)
    raced: list[Any] = []

    async def hook(step: str) -> None:
        if step == "put_start:reserved" and not raced:
            raced.append(await put(other, "k", 1000))

    svc.fault_hook = hook
    reps = await svc.upsert_start("writer-2", "k", [1000])
    assert raced  # the racing put's object, then upserted in place
    assert raced[0][0].buffer_address == reps[0].buffer_address
    await svc.upsert_end("writer-2", "k")
    await assert_clean(svc)
