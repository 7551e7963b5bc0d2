"""The evictor lease on three backends: one holder, takeover after expiry, fencing of a paused
former leader, two evictors racing, a leader killed mid-pass and a successor finishing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.eviction.coordinator import LeaseLost
from tests.eviction_helpers import (
    NO_CLOCKS,
    OBJ,
    assert_clean,
    assert_parents_alive,
    chain,
    evict_service,
    put_blocks,
    stored,
)

TTL = 300


async def two(
    make_service: Any, capacity: int = 100 * OBJ, ttl_ms: int = TTL, **cfg: Any
) -> list[MasterService]:
    a = await evict_service(make_service, capacity, evictor_lease_ttl_ms=ttl_ms, **cfg)
    b: MasterService = await make_service(
        enable_radix_tree=cfg.get("enable_radix_tree", True),
        evictor_lease_ttl_ms=ttl_ms,
        default_kv_lease_ttl_ms=2_000,
        eviction_high_watermark_ratio=0.5,
        eviction_ratio=0.5,
        radix_eviction_target="watermark-ratio",
    )
    return [a, b]


async def test_lease_one_holder_and_takeover(make_service: Any) -> None:
    a, b = await two(make_service, ttl_ms=1_000)  # a renewal a loaded stall does not outlast
    la, lb = a.evictor_lease, b.evictor_lease
    assert await la.acquire()
    e1 = la.epoch
    assert not await lb.acquire()
    assert await la.acquire() and la.epoch == e1  # renewal keeps the epoch
    await asyncio.sleep(1.05)
    assert await lb.acquire() and lb.epoch > e1  # takeover raises it
    with pytest.raises(LeaseLost):
        await la.ensure()
    await lb.release()
    assert await la.acquire() and la.epoch > lb.epoch  # the epoch never goes down
    assert (await la.read()).holder == la.holder


async def test_epochs_stay_monotonic_when_redis_restarts_empty(make_service: Any) -> None:
    """A restart that loses the lease record and every shard fence must not let the next
    evictor start again at a low epoch: a paused evictor of before the restart, holding its
    old epoch, would then pass the fences. Epochs are at least Redis time in ms."""
    a, b = await two(make_service)
    la, lb = a.evictor_lease, b.evictor_lease
    assert await la.acquire()
    old = la.epoch
    # Redis restarts empty: the lease record and the fences are gone.
    ns_keys = [a.keys.global_key("evictor"), *a.keys.all_anchors()]
    await a.backend.command("DEL", *ns_keys[:1])
    for anchor in ns_keys[1:]:
        await a.backend.command("HDEL", anchor, "fence")
    # A restart takes longer than a millisecond; these deletes may not (an epoch acquired in
    # the same Redis millisecond as the old one would equal it).
    while await a.backend.time_ms() <= old:
        await asyncio.sleep(0.001)
    assert await lb.acquire()
    assert lb.epoch > old
    fences = [await a.backend.command("HGET", k, "fence") for k in a.keys.all_anchors()]
    assert all(int(f) == lb.epoch for f in fences)
    # The paused former holder's old epoch is below every fence now: a fenced step with it is
    # refused by the fence alone (its lease expiry is given far in the future here).
    now = await a.backend.time_ms()
    [(_, reply)] = await a.ctx.run_sharded(
        "evict_leaves", [(0, ["x" * 64, 0])], [old, now + 60_000, 0, 0, 0, *NO_CLOCKS]
    )
    assert int(reply[0]) == 0  # fenced
    [(_, reply)] = await b.ctx.run_sharded(
        "evict_leaves", [(0, ["x" * 64, 0])], [lb.epoch, now + 60_000, 0, 0, 0, *NO_CLOCKS]
    )
    assert int(reply[0]) == 1  # the new epoch passes


async def test_fenced_former_leader_cannot_write(make_service: Any) -> None:
    a, b = await two(make_service)
    blocks = chain("fence", 5)
    await put_blocks(a, blocks)
    assert await a.evictor_lease.acquire()
    stale = a.evictor_lease.head()
    await asyncio.sleep(TTL / 1000 + 0.05)
    assert await b.evictor_lease.acquire()  # new epoch, every shard fenced
    leaf = blocks[-1][0]
    shard = a.keys.shard_of(leaf)
    now = await a.backend.time_ms()
    # the paused leader's script: refused by time, and by the fence even with a forged expiry
    for head in (stale, [stale[0], now + 60_000]):
        args = [*head, 0, 0, 0, *NO_CLOCKS]
        [(_, reply)] = await a.run_sharded("evict_leaves", [(shard, [leaf, 0])], args)
        assert int(reply[0]) == 0
    assert await stored(a, leaf)
    # the holder's own scripts go through
    [(_, reply)] = await b.run_sharded(
        "evict_leaves", [(shard, [leaf, 0])], [*b.evictor_lease.head(), 0, 0, 0, *NO_CLOCKS]
    )
    assert int(reply[0]) == 1 and not await stored(a, leaf)
    await b.resume_unlinks()
    await b.drain_outboxes()
    await assert_clean(a)


async def test_two_evictors_racing(make_service: Any) -> None:
    a, b = await two(make_service, ttl_ms=3_000)  # (a pass outlived 300 ms at load 12: LeaseLost)
    blocks = chain("race", 60)
    await put_blocks(a, blocks)
    ra, rb = await asyncio.gather(a.evict_once(), b.evict_once())
    # one pass did the work (60 of 100 used -> goal 0.0), the other found nothing left to do
    assert sorted([ra.evicted_objects, rb.evicted_objects]) == [0, 60]
    assert {ra.reason, rb.reason} <= {"watermark", "idle", "lease_held"}
    await assert_parents_alive(a, dict(blocks))
    await assert_clean(a)
    # without waiting, the loser says who holds the lease
    assert await a.evictor_lease.acquire()
    r = await b.evict_once(wait=False)
    assert r.reason == "lease_held" and r.holder == a.evictor_lease.holder
    await a.evictor_lease.release()


class Killed(Exception):
    pass


async def test_leader_killed_mid_pass_successor_finishes(make_service: Any) -> None:
    # One leaf per round (a round would otherwise take the whole chain, unlinks included).
    a, b = await two(make_service, script_batch_size=1)
    blocks = chain("kill", 60)
    await put_blocks(a, blocks)
    rounds: list[str] = []

    async def die(step: str) -> None:
        if step == "evict:evicted":
            rounds.append(step)
            if len(rounds) == 3:  # killed between evicting a leaf and unlinking its parent
                raise Killed

    async def no_release() -> None:  # a killed process releases nothing
        return None

    a.fault_hook = die
    a.evictor_lease.release = no_release  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await a.evict_once()
    t0 = time.monotonic()
    res = await b.evict_once()  # waits for the dead leader's lease to expire
    waited = time.monotonic() - t0 - res.seconds
    assert waited < 20 * TTL / 1000, (waited, res.seconds)  # about one ttl; loose for loaded CI
    assert res.epoch > a.evictor_lease.epoch
    assert res.evicted_objects == 57
    for blk, _ in blocks:
        assert not await stored(a, blk)
    assert (await b.usage()).allocated == 0
    await assert_clean(b)


async def test_paused_leader_is_fenced_after_takeover(make_service: Any) -> None:
    a, b = await two(make_service)
    blocks = chain("pause", 60)
    await put_blocks(a, blocks)
    resume = asyncio.Event()
    paused = asyncio.Event()

    async def pause(step: str) -> None:
        if step == "evict:chosen" and not paused.is_set():
            paused.set()
            await resume.wait()

    a.fault_hook = pause
    task = asyncio.create_task(a.evict_once())
    await paused.wait()
    res = await b.evict_once()  # takes over once A's lease expired
    assert res.evicted_objects == 60
    assert await b.evictor_lease.acquire()  # B keeps the role
    resume.set()
    with pytest.raises(LeaseLost):
        await task
    assert b.eviction_metrics.evicted_keys == 60 and a.eviction_metrics.evicted_keys == 0
    await b.evictor_lease.release()
    await assert_parents_alive(a, dict(blocks))
    await assert_clean(a)


async def test_background_coordinators(make_service: Any) -> None:
    a, b = await two(make_service)
    ca = a.eviction_coordinator(check_interval_ms=10)
    cb = b.eviction_coordinator(check_interval_ms=10)
    ca.start()
    await asyncio.sleep(0.05)
    cb.start()
    try:
        await put_blocks(a, chain("bg", 80))  # 0.8 > 0.5: the holder evicts down to 0.0
        ma, mb = a.eviction_metrics, b.eviction_metrics
        # (the frees land before the pass records its metrics: wait for both)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if (await a.usage()).allocated == 0 and ma.evicted_keys + mb.evicted_keys >= 80:
                break
            await asyncio.sleep(0.01)
        assert (await a.usage()).allocated == 0
        # (on a loaded machine a late renewal can leave the lease between holders for a moment)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if ca.is_leader != cb.is_leader:
                break
            await asyncio.sleep(0.01)
        assert ca.is_leader != cb.is_leader
        leader, follower = (ca, cb) if ca.is_leader else (cb, ca)
        # (under load the role may have moved; the two together evicted each object once)
        assert ma.evicted_keys + mb.evicted_keys == 80
        assert ma.janitor_runs + mb.janitor_runs >= 1
        # the leader dies without releasing: the follower takes over once the lease lapses (about
        # one ttl; the bound is loose because a loaded CI machine delays the follower's checks,
        # and the property is the takeover, not its speed)
        task = leader._task
        assert task is not None

        async def no_release() -> None:
            return None

        leader.lease.release = no_release  # type: ignore[method-assign]
        task.cancel()
        t0 = time.monotonic()
        while not follower.is_leader:
            await asyncio.sleep(0.01)
            assert time.monotonic() - t0 < 30 * TTL / 1000, "the follower never took over"
        leader._task = None
    finally:
        await ca.stop()
        await cb.stop()
    await assert_clean(a)
