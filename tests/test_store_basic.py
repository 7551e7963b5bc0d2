"""Object store behaviour on three backends (fakeredis, Redis, Redis Cluster): the flows of
Mooncake's master tests (put/get/remove, leases, forced and regex removal, stale put takeover,
unique replica segments, mount/unmount, client expiry) plus our allocator and crash recovery."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicaDescriptor, ReplicateConfig, Segment
from tests.helpers import h

MB = 1 << 20
C = "client-1"


def seg(i: int, size: int = MB) -> Segment:
    return Segment(
        f"seg{i}",
        f"node{i}:seg",
        base=(i + 1) << 40,
        size=size,
        te_endpoint=f"10.0.0.{i}:1",
        protocol="tcp",
    )


async def mounted(make_service: Any, n: int = 2, size: int = MB, **cfg: Any) -> MasterService:
    cfg.setdefault("default_kv_lease_ttl_ms", 200)
    svc: MasterService = await make_service(**cfg)
    for i in range(n):
        await svc.mount_segment(seg(i, size), C)
    return svc


async def put(
    svc: MasterService, key: str, size: int = 1000, **cfg: Any
) -> list[ReplicaDescriptor]:
    reps = await svc.put_start(C, key, [size], ReplicateConfig(**cfg))
    await svc.put_end(C, key)
    return reps


async def assert_clean(svc: MasterService) -> None:
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]


def code(exc: pytest.ExceptionInfo[MooncakeError]) -> ErrorCode:
    return exc.value.code


async def test_put_get_remove_flow(make_service: Any) -> None:
    svc = await mounted(make_service, default_kv_lease_ttl_ms=1000)  # past a loaded stall
    reps = await svc.put_start(C, "k1", [100, 28], ReplicateConfig())
    assert len(reps) == 1 and reps[0].size == 128 and reps[0].status == "PROCESSING"
    r = reps[0]
    base = seg(int(r.segment_id[3:])).base
    assert r.buffer_address == base + r.offset and r.transport_endpoint.startswith("10.0.0.")
    assert await svc.exist_key("k1") is False  # not complete yet
    with pytest.raises(MooncakeError) as e:
        await svc.get_replica_list("k1")
    assert code(e) == ErrorCode.REPLICA_IS_NOT_READY
    await svc.put_end(C, "k1")
    got = await svc.get_replica_list("k1")
    assert [x.buffer_address for x in got.replicas] == [r.buffer_address]
    assert got.replicas[0].status == "COMPLETE" and got.lease_ttl_ms == 1000
    assert await svc.exist_key("k1") is True
    with pytest.raises(MooncakeError) as e:
        await svc.remove("k1")
    assert code(e) == ErrorCode.OBJECT_HAS_LEASE
    await asyncio.sleep(1.05)
    await svc.remove("k1")
    assert await svc.exist_key("k1") is False
    with pytest.raises(MooncakeError) as e:
        await svc.remove("k1")
    assert code(e) == ErrorCode.OBJECT_NOT_FOUND
    stats = await svc.segment_stats()
    assert all(s.allocated == 0 for s in stats)
    await assert_clean(svc)


async def test_bad_input_changes_nothing(make_service: Any) -> None:
    svc = await mounted(make_service, n=1)
    cases: list[tuple[Any, ...]] = [
        ("k", [10], ReplicateConfig(replica_num=0), ErrorCode.INVALID_PARAMS),
        ("", [10], ReplicateConfig(), ErrorCode.INVALID_PARAMS),
        ("k", [0], ReplicateConfig(), ErrorCode.INVALID_PARAMS),
        ("k", [-5], ReplicateConfig(), ErrorCode.INVALID_PARAMS),
        ("k", [], ReplicateConfig(), ErrorCode.INVALID_PARAMS),
        ("k", [2 * MB], ReplicateConfig(), ErrorCode.INVALID_PARAMS),
    ]
    for key, lengths, cfg, want in cases:
        with pytest.raises(MooncakeError) as e:
            await svc.put_start(C, key, lengths, cfg)
        assert code(e) == want, (key, lengths, cfg)
        assert e.value.message
    with pytest.raises(MooncakeError) as e:
        await svc.put_end(C, "missing")
    assert code(e) == ErrorCode.OBJECT_NOT_FOUND
    with pytest.raises(MooncakeError) as e:
        await svc.remove_by_regex("([a-z")
    assert code(e) == ErrorCode.INVALID_PARAMS
    await svc.unmount_segment("never-mounted", C)  # unknown segment: OK
    with pytest.raises(MooncakeError):
        await svc.mount_segment(Segment("bad{id}", "x", 0, 10), C)
    with pytest.raises(MooncakeError):
        await svc.mount_segment(Segment("s", "x", 0, 0), C)
    # buffer addresses are uint64: a segment reaching past 2^64 would hand out larger ones
    for base, size in (((1 << 64) - 10, 11), (1 << 64, 1), (0, (1 << 64) + 1)):
        with pytest.raises(MooncakeError) as e:
            await svc.mount_segment(Segment("s64", "x", base, size), C)
        assert code(e) == ErrorCode.INVALID_PARAMS, (base, size)
    [st] = await svc.segment_stats()
    assert st.allocated == 0 and st.allocations == 0
    assert await svc.objects.all_object_keys() == []
    await assert_clean(svc)


async def test_regex_that_runs_too_long_is_refused(make_service: Any) -> None:
    svc = await mounted(make_service, n=1)
    await put(svc, "a" * 40 + "!")
    with pytest.raises(MooncakeError) as e:
        await svc.remove_by_regex(r"^(a|aa)+$", force=True)
    assert code(e) == ErrorCode.INVALID_PARAMS
    assert await svc.exist_key("a" * 40 + "!")


async def test_never_overwrite_and_illegal_client(make_service: Any) -> None:
    svc = await mounted(make_service)
    await svc.put_start(C, "k", [10])
    with pytest.raises(MooncakeError) as e:
        await svc.put_start("other", "k", [10])
    assert code(e) == ErrorCode.OBJECT_ALREADY_EXISTS
    with pytest.raises(MooncakeError) as e:
        await svc.put_end("other", "k")
    assert code(e) == ErrorCode.ILLEGAL_CLIENT
    with pytest.raises(MooncakeError) as e:
        await svc.put_revoke("other", "k")
    assert code(e) == ErrorCode.ILLEGAL_CLIENT
    with pytest.raises(MooncakeError) as e:
        await svc.remove("k", force=True)
    assert code(e) == ErrorCode.REPLICA_IS_NOT_READY
    await svc.put_end(C, "k")
    with pytest.raises(MooncakeError) as e:
        await svc.put_revoke(C, "k")
    assert code(e) == ErrorCode.INVALID_WRITE
    with pytest.raises(MooncakeError) as e:
        await svc.put_start(C, "k", [10])
    assert code(e) == ErrorCode.OBJECT_ALREADY_EXISTS
    await assert_clean(svc)


async def test_revoke_frees_and_unregisters(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    a, b = h("a"), h("b")
    await put(svc, f"{a}_0_k")
    await svc.put_start(C, f"{b}_0_k", [10], ReplicateConfig(parent_block_hash=a))
    assert (await svc.get_keys_by_prefix(a)).children == [b]
    await svc.put_revoke(C, f"{b}_0_k")
    assert (await svc.get_keys_by_prefix(a)).children == []
    with pytest.raises(MooncakeError):
        await svc.get_keys_by_prefix(b)
    assert sum(s.allocated for s in await svc.segment_stats()) == 1000
    await assert_clean(svc)


async def test_stale_put_takeover(make_service: Any) -> None:
    # Timeouts a loaded machine's stall between two calls does not pass.
    svc = await mounted(
        make_service, n=1, put_start_discard_timeout_ms=1000, put_start_release_timeout_ms=2000
    )
    first = await svc.put_start(C, "k", [1000])
    with pytest.raises(MooncakeError):
        await svc.put_start("c2", "k", [1000])
    await asyncio.sleep(1.05)
    second = await svc.put_start("c2", "k", [1000])
    assert second[0].offset != first[0].offset  # the old buffer is not reused before release
    [st] = await svc.segment_stats()
    assert st.allocated == 2000  # discarded but not yet released
    await svc.put_end("c2", "k")
    with pytest.raises(MooncakeError) as e:
        await svc.put_end(C, "k")
    assert code(e) == ErrorCode.ILLEGAL_CLIENT
    await assert_clean(svc)
    await asyncio.sleep(1.0)
    await svc.run_janitor_once(force=True)
    [st] = await svc.segment_stats()
    assert st.allocated == 1000
    await assert_clean(svc)


async def test_janitor_discards_stale_puts(make_service: Any) -> None:
    svc = await mounted(
        make_service,
        enable_radix_tree=True,
        put_start_discard_timeout_ms=150,
        put_start_release_timeout_ms=1000,  # far from the first run (a loaded machine stalls)
    )
    key = f"{h('p')}_0_k"
    await svc.put_start(C, key, [500])
    await asyncio.sleep(0.2)
    rep = await svc.run_janitor_once(force=True)
    assert rep.discarded_puts == 1
    assert await svc.exist_key(key) is False
    with pytest.raises(MooncakeError):
        await svc.get_keys_by_prefix(h("p"))
    assert sum(s.allocated for s in await svc.segment_stats()) == 500
    await asyncio.sleep(0.85)
    rep = await svc.run_janitor_once(force=True)
    assert rep.released_buffers == 1
    assert sum(s.allocated for s in await svc.segment_stats()) == 0
    await assert_clean(svc)


async def test_unique_replica_segments_and_partial_success(make_service: Any) -> None:
    svc = await mounted(make_service, n=3)
    reps = await svc.put_start(C, "k3", [100], ReplicateConfig(replica_num=3))
    assert len({r.segment_id for r in reps}) == 3
    reps = await svc.put_start(C, "k5", [100], ReplicateConfig(replica_num=5))
    assert len(reps) == 3 and len({r.segment_id for r in reps}) == 3
    reps = await svc.put_start(C, "kp", [100], ReplicateConfig(preferred_segments=("seg2",)))
    assert reps[0].segment_id == "seg2"
    reps = await svc.put_start(
        C, "kq", [100], ReplicateConfig(preferred_segments=("seg2",), preferred_segment="seg1")
    )
    assert reps[0].segment_id == "seg1"
    await assert_clean(svc)


async def test_no_available_handle_requests_eviction(make_service: Any) -> None:
    svc = await mounted(make_service, n=1, size=4096)
    await svc.put_start(C, "big", [4000])
    with pytest.raises(MooncakeError) as e:
        await svc.put_start(C, "more", [200])
    assert code(e) == ErrorCode.NO_AVAILABLE_HANDLE
    assert await svc.backend.client.get(svc.keys.global_key("evict_needed"))
    with pytest.raises(MooncakeError) as e:
        await svc.put_start(C, "big", [200])  # existence is reported before allocation
    assert code(e) == ErrorCode.OBJECT_ALREADY_EXISTS
    await assert_clean(svc)


async def test_allocator_coalesces(make_service: Any) -> None:
    svc = await mounted(make_service, n=1, size=10_000, default_kv_lease_ttl_ms=0)
    keys = [f"k{i}" for i in range(10)]
    res = await svc.batch_put_start(C, keys, [[1000]] * 10)
    offs = sorted(r[0].offset for r in res if isinstance(r, list))
    assert offs == list(range(0, 10_000, 1000))
    await svc.batch_put_end(C, keys)
    assert await svc.batch_remove(keys[::2]) == [None] * 5
    with pytest.raises(MooncakeError):
        await svc.put_start(C, "x", [2000])  # fragmented: no 2000-byte hole
    assert await svc.batch_remove(keys[1::2]) == [None] * 5
    reps = await svc.put_start(C, "x", [10_000])
    assert reps[0].offset == 0
    await assert_clean(svc)


async def test_allocator_batch_is_best_fit(make_service: Any) -> None:
    """One reserve call carves a held extent in Lua (alloc.lua): each allocation must still be
    the best fit (smallest extent, lowest offset among equals) over the held extent and the
    free ZSETs, as if every allocation had been written at once."""
    svc = await mounted(make_service, n=1, size=10_000, default_kv_lease_ttl_ms=0)
    keys = [f"k{i}" for i in range(10)]
    await svc.batch_put_start(C, keys, [[1000]] * 10)
    await svc.batch_put_end(C, keys)
    assert await svc.batch_remove([keys[1], keys[3], keys[4]]) == [None] * 3
    # Holes [1000, 2000) and [3000, 5000): 1500 takes the 2000 hole (held: 500 left), 1000
    # the ZSET's 1000 hole (the held rest goes back), 500 the rest put back.
    res = await svc.batch_put_start(C, ["a", "b", "c"], [[1500], [1000], [500]])
    assert [r[0].offset for r in res if isinstance(r, list)] == [3000, 1000, 4500]
    await svc.batch_put_end(C, ["a", "b", "c"])
    assert await svc.batch_remove([keys[5], keys[6], keys[7], "b"]) == [None] * 4
    # Holes [1000, 2000) and [5000, 8000): 2000 -> 5000 (held: [7000, 8000)); 600: a tie of
    # lengths, the lower offset wins (the ZSET's 1000; held: [1600, 2000)); 400: the held
    # rest is the tighter fit.
    res = await svc.batch_put_start(C, ["d", "e", "f"], [[2000], [600], [400]])
    assert [r[0].offset for r in res if isinstance(r, list)] == [5000, 1000, 1600]
    await svc.batch_put_end(C, ["d", "e", "f"])
    [stats] = await svc.segment_stats()
    assert stats.allocated == 10_000 - 3000 + (1500 + 1000 + 500) - 4000 + (2000 + 600 + 400)
    await assert_clean(svc)


async def test_batch_calls_one_result_per_key(make_service: Any) -> None:
    svc = await mounted(make_service, n=2, size=8 * MB, enable_radix_tree=True)
    keys = [f"{h(i)}_0_k" for i in range(128)]
    res = await svc.batch_put_start(C, [*keys, ""], [[4096]] * 129)
    assert all(isinstance(r, list) and len(r) == 1 for r in res[:128])
    assert isinstance(res[128], MooncakeError)
    ends = await svc.batch_put_end(C, [*keys, "missing"])
    assert ends[:128] == [None] * 128 and isinstance(ends[128], MooncakeError)
    ex = await svc.batch_exist_key([*keys, "missing"])
    assert ex == [True] * 128 + [False]
    got = await svc.batch_get_replica_list([keys[0], "missing"])
    assert not isinstance(got[0], MooncakeError) and isinstance(got[1], MooncakeError)
    again = await svc.batch_put_start(C, keys[:3], [[10]] * 3)
    assert all(
        isinstance(r, MooncakeError) and r.code == ErrorCode.OBJECT_ALREADY_EXISTS for r in again
    )
    assert (await svc.get_nodes([h(0)]))[0] is not None
    await assert_clean(svc)
    rm = await svc.batch_remove(keys, force=True)
    assert rm == [None] * 128
    assert sum(s.allocated for s in await svc.segment_stats()) == 0
    assert await svc.get_nodes([h(0)]) == [None]
    await assert_clean(svc)


async def test_remove_by_regex_and_all(make_service: Any) -> None:
    svc = await mounted(make_service, default_kv_lease_ttl_ms=5000)  # leased for the test
    for i in range(6):
        await put(svc, f"model/{i}")
    await put(svc, "other/1")
    await svc.put_start(C, "model/processing", [10])
    await svc.get_replica_list("model/0")  # leased
    assert await svc.remove_by_regex(r"^model/") == 5  # leased and incomplete skipped
    assert await svc.exist_key("model/0")
    assert await svc.remove_by_regex(r"^model/", force=True) == 1
    assert await svc.remove_all(force=True) == 1  # other/1; the processing put stays
    assert await svc.objects.all_object_keys() == ["model/processing"]
    await assert_clean(svc)


async def test_soft_and_hard_pin(make_service: Any) -> None:
    svc = await mounted(make_service, default_kv_soft_pin_ttl_ms=10_000)
    await put(svc, "soft", with_soft_pin=True)
    await put(svc, "hard", with_hard_pin=True)
    await put(svc, "plain")
    c = svc.backend.client
    soft = await c.hgetall(svc.keys.obj(svc.shard_of_key("soft"), "soft"))
    assert b"sp" in soft
    lru_h = await c.zscore(svc.keys.shard_key(svc.shard_of_key("hard"), "lru"), "hard")
    lru_p = await c.zscore(svc.keys.shard_key(svc.shard_of_key("plain"), "lru"), "plain")
    assert lru_h is None and lru_p is not None  # hard-pinned objects are never eviction candidates
    await svc.remove("hard")  # pinned objects can be removed
    await svc.remove("soft")
    await assert_clean(svc)


async def test_lease_is_max_of_old_and_new(make_service: Any) -> None:
    svc = await mounted(make_service, default_kv_lease_ttl_ms=1000)
    await put(svc, "k")
    okey = svc.keys.obj(svc.shard_of_key("k"), "k")
    await svc.exist_key("k")
    l1 = int(await svc.backend.client.hget(okey, "l"))
    await svc.backend.client.hset(okey, "l", l1 + 60_000)
    await svc.get_replica_list("k")
    assert int(await svc.backend.client.hget(okey, "l")) == l1 + 60_000


async def test_mount_idempotent_unmount_drops(make_service: Any) -> None:
    svc = await mounted(make_service, n=2, enable_radix_tree=True)
    await svc.mount_segment(seg(0), C)  # idempotent
    assert len(await svc.segment_stats()) == 2
    a, b = h("a"), h("b")
    one = await svc.put_start(C, f"{a}_0_k", [100], ReplicateConfig(preferred_segment="seg0"))
    await svc.put_end(C, f"{a}_0_k")
    await svc.put_start(C, f"{b}_0_k", [100], ReplicateConfig(replica_num=2, parent_block_hash=a))
    await svc.put_end(C, f"{b}_0_k")
    assert one[0].segment_id == "seg0"
    await svc.unmount_segment("seg0", C)
    assert await svc.exist_key(f"{a}_0_k") is False  # its only replica was there
    got = await svc.get_replica_list(f"{b}_0_k")
    assert [r.segment_id for r in got.replicas] == ["seg1"]
    node = await svc.get_keys_by_prefix(a)  # a is now a shell (b still names it)
    assert node.keys == [] and node.children == [b]
    assert [s.id for s in await svc.segment_stats()] == ["seg1"]
    await assert_clean(svc)
    await svc.unmount_segment("seg1", C)
    assert await svc.exist_key(f"{b}_0_k") is False
    assert await svc.get_nodes([a, b]) == [None, None]
    await svc.mount_segment(seg(0), C)  # a re-mount starts empty
    [st] = await svc.segment_stats()
    assert st.allocated == 0
    await assert_clean(svc)


async def test_usage_sums_the_mounted_registered_segments(make_service: Any) -> None:
    """The used ratio's read (one call on a single Redis, the registry then each segment on a
    cluster): mounted segments only, a registry entry without a segment skipped."""
    svc = await mounted(make_service, n=3, size=MB)
    await svc.put_start(C, "u1", [1000], ReplicateConfig(replica_num=2))
    await svc.put_end(C, "u1")
    await svc.backend.client.hset(svc.keys.global_key("segments"), "ghost", "x")
    await svc.backend.client.hset(svc.keys.segment_anchor("seg2"), "mounted", "0")
    stats = {s.id: s for s in await svc.segment_stats()}
    want = [s for s in stats.values() if s.mounted]
    usage = await svc.usage()
    assert usage.segments == ("ghost", "seg0", "seg1", "seg2")
    assert usage.capacity == 2 * MB
    assert usage.allocated == sum(s.allocated for s in want) > 0
    assert usage == await svc.segments.usage(["ghost", "seg0", "seg1", "seg2"])
    assert await svc.allocator.segment_ids() == ["ghost", "seg0", "seg1", "seg2"]


async def test_unmount_vetoes_uncommitted_reservation(make_service: Any) -> None:
    svc = await mounted(make_service, n=1)

    async def hook(step: str) -> None:
        if step == "put_start:reserved":
            svc.fault_hook = None
            await svc.unmount_segment("seg0", C)

    svc.fault_hook = hook
    with pytest.raises(MooncakeError) as e:
        await svc.put_start(C, "k", [100])
    assert code(e) == ErrorCode.SEGMENT_NOT_FOUND
    assert await svc.objects.all_object_keys() == []
    await assert_clean(svc)


async def test_client_expiry(make_service: Any) -> None:
    # c2 pings every 0.1 s; C stays silent: only C outlives the 1 s ttl. The janitor runs after
    # each ping until it expires someone (the service judges silence only over time it heard
    # without a gap of half the ttl, so the pings are frequent: a loaded machine stalls).
    svc = await mounted(make_service, n=1, client_live_ttl_ms=1000, enable_radix_tree=True)
    await svc.mount_segment(Segment("other", "o", 0, MB), "c2")
    assert (await svc.ping(C)).client_status == "OK"
    key = f"{h('x')}_0_k"
    await put(svc, key, preferred_segment="seg0")
    expired = unmounted = 0
    deadline = time.monotonic() + 15
    while not expired:
        assert time.monotonic() < deadline, "C was never expired"
        await asyncio.sleep(0.1)
        await svc.ping("c2")
        rep = await svc.run_janitor_once(force=True)
        expired, unmounted = expired + rep.expired_clients, unmounted + rep.unmounted_segments
    assert expired == 1 and unmounted == 1
    assert [s.id for s in await svc.segment_stats()] == ["other"]
    assert await svc.exist_key(key) is False
    assert await svc.get_nodes([h("x")]) == [None]
    pong = await svc.ping(C)
    assert pong.client_status == "NEED_REMOUNT" and pong.view_version_id > 0
    await svc.remount_segment([seg(0)], C)
    assert (await svc.ping(C)).client_status == "OK"
    await assert_clean(svc)


async def test_janitor_runs_once_per_interval(make_service: Any) -> None:
    svc = await mounted(make_service, n=1, janitor_interval_ms=5000)
    other = await make_service(janitor_interval_ms=5000)
    runs = await asyncio.gather(
        svc.run_janitor_once(), other.run_janitor_once(), svc.run_janitor_once()
    )
    assert sum(r.ran for r in runs) == 1


async def test_crash_between_reserve_and_commit_is_reclaimed(make_service: Any) -> None:
    # A deadline a loaded machine's stall between reserve and commit cannot pass.
    svc = await mounted(
        make_service, n=1, alloc_commit_deadline_ms=1000, alloc_reclaim_grace_ms=1100
    )

    async def crash(step: str) -> None:
        if step == "put_start:reserved":
            raise RuntimeError("crash")

    svc.fault_hook = crash
    with pytest.raises(RuntimeError):
        await svc.put_start(C, "k", [100])
    svc.fault_hook = None
    await put(svc, "ok")
    [st] = await svc.segment_stats()
    assert st.allocated == 1100 and st.pending == 2
    await assert_clean(svc)  # a pending reservation is not a leak yet
    await asyncio.sleep(1.15)
    rep = await svc.run_janitor_once(force=True)
    assert rep.reclaimed_allocations == 1 and rep.confirmed_allocations == 1
    [st] = await svc.segment_stats()
    assert st.allocated == 1000 and st.pending == 0
    await assert_clean(svc)


async def test_crash_between_erase_and_drain_is_drained(make_service: Any) -> None:
    svc = await mounted(make_service, n=1, default_kv_lease_ttl_ms=0)
    await put(svc, "k")

    async def crash(step: str) -> None:
        if step == "erase:erased":
            raise RuntimeError("crash")

    svc.fault_hook = crash
    with pytest.raises(RuntimeError):
        await svc.remove("k")
    svc.fault_hook = None
    [st] = await svc.segment_stats()
    assert st.allocated == 1000
    await assert_clean(svc)  # the outbox holds the free
    rep = await svc.run_janitor_once(force=True)
    assert rep.drained_frees == 1
    [st] = await svc.segment_stats()
    assert st.allocated == 0
    await assert_clean(svc)


async def test_radix_flag_off_writes_no_radix_state(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=False)
    a = h("a")
    await put(svc, f"{a}_0_k", parent_block_hash=h("z"))
    assert await svc.get_nodes([a, h("z")]) == [None, None]
    await assert_clean(svc)


async def test_radix_parent_conflict_is_refused(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True, radix_put_guard=False)
    a, b, c = h("a"), h("b"), h("c")
    await put(svc, f"{c}_0_k", parent_block_hash=a)
    with pytest.raises(MooncakeError) as e:
        await svc.put_start(C, f"{c}_1_k", [10], ReplicateConfig(parent_block_hash=b))
    assert code(e) == ErrorCode.INVALID_PARAMS
    assert (await svc.get_nodes([b])) == [None]  # the fresh edge was dropped again
    assert sum(s.allocated for s in await svc.segment_stats()) == 1000
    await assert_clean(svc)


async def test_failed_put_keeps_an_existing_parent_edge(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True, radix_put_guard=False)
    a, b = h("a"), h("b")
    await put(svc, f"{b}_0_k", parent_block_hash=a)
    with pytest.raises(MooncakeError) as e:  # commit refuses: the edge existed before
        await svc.put_start(C, f"{b}_0_k", [10], ReplicateConfig(parent_block_hash=a))
    assert code(e) == ErrorCode.OBJECT_ALREADY_EXISTS
    assert (await svc.get_keys_by_prefix(a)).children == [b]
    await assert_clean(svc)
    with pytest.raises(MooncakeError) as e:  # no buffer: refused by the precheck, no commit
        await svc.put_start(C, f"{b}_0_k", [2 * MB], ReplicateConfig(parent_block_hash=a))
    assert code(e) == ErrorCode.OBJECT_ALREADY_EXISTS
    assert (await svc.get_keys_by_prefix(a)).children == [b]
    await svc.remove(f"{b}_0_k", force=True)
    assert await svc.get_nodes([a, b]) == [None, None]
    await assert_clean(svc)


def test_complete_replicas_read_the_record_and_its_segment_entries() -> None:
    """get_replicas replies the stored record with the segment-table entries it names; only
    COMPLETE replicas become descriptors, each at its segment's base plus its offset."""
    import json

    from mooncake_redis.lua_calls.store import complete_replicas

    one = json.dumps(["s1", "00007f0000000000", "ep1", "tcp", "n1"]).encode()
    two = json.dumps(["s2", "0000000000001000", "ep2", "rdma", "n2"]).encode()
    assert complete_replicas(b"", []) == []
    got = complete_replicas(b"5,C,1,10,1000;6,P,2,0,20;7,C,2,20,30", [b"1", one, b"2", two])
    assert [(r.replica_id, r.segment_id, r.buffer_address, r.size, r.offset) for r in got] == [
        (5, "s1", 0x7F0000000000 + 0x10, 0x1000, 0x10),
        (7, "s2", 0x1000 + 0x20, 0x30, 0x20),
    ]
    assert [(r.protocol, r.transport_endpoint, r.segment_name) for r in got] == [
        ("tcp", "ep1", "n1"),
        ("rdma", "ep2", "n2"),
    ]
    [only] = complete_replicas(b"9,C,3,0,40", [b"3", one])  # one segment: no table built
    assert (only.replica_id, only.buffer_address, only.size) == (9, 0x7F0000000000, 0x40)
