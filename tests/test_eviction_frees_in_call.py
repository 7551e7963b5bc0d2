"""On a single Redis, ``evict_leaves`` applies its buffer frees to the segments' allocators in
the eviction call itself (lua/includes/evict_free.lua) and reads the pass's used ratio after
them: no outbox entry, no ``outbox_apply`` and no ``segment_info`` round trip per round;
BatchEvict's ``evict_keys`` applies its frees the same way. A cluster keeps the outbox (a
segment tag may live on another node). Both leave the same store: allocators freed, outboxes
empty, the ratio the pass reports equal to a fresh read, fsck clean; on fakeredis, Redis and
Redis Cluster."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis import lua_calls as lua
from mooncake_redis.eviction.goal import EvictionDeps
from mooncake_redis.eviction.leaf_write import evict_leaves
from mooncake_redis.lua_calls.evict import EvictedLeaf
from mooncake_redis.models import Segment
from mooncake_redis.types import EvictionResult
from tests.eviction_helpers import (
    CLIENT,
    NO_CLOCKS,
    OBJ,
    assert_clean,
    assert_parents_alive,
    block_keys,
    chain,
    evict_service,
    put_blocks,
    stored,
)
from tests.helpers import record_calls


async def outbox_entries(svc: MasterService) -> int:
    client = svc.backend.client
    n = 0
    for shard in range(svc.ctx.config.num_shards):
        n += await client.llen(svc.keys.shard_key(shard, "outbox"))
    return n


async def test_a_pass_frees_in_its_eviction_call(make_service: Any) -> None:
    """MLA chains (the block-leaf path) and MHA-like blocks of 4 keys (the general path, whose
    frees store_erase pushes to the outbox) over two segments, evicted in part by a pass that
    stops at its goal: the frees are applied and the outbox is empty when the pass returns,
    without a drain; on a single Redis without outbox_apply or segment_info calls."""
    svc = await evict_service(
        make_service, 200 * OBJ, segments=2, num_shards=8, eviction_ratio=0.25
    )
    mla = [chain(f"mla{c}-", 8) for c in range(6)]
    mha = [chain(f"mha{c}-", 4) for c in range(4)]
    assert await put_blocks(svc, [b for c in mla for b in c]) == 48
    assert await put_blocks(svc, [b for c in mha for b in c], keys_per_block=4) == 64
    before = await svc.usage()
    assert before.allocated == 112 * OBJ and before.ratio > 0.5
    recorded = record_calls(svc)
    res = await svc.evict_once()
    calls = Counter(c.name for c in recorded)
    assert 0 < res.evicted_objects < 112
    assert res.rounds >= 1
    after = await svc.usage()
    assert after.allocated == (112 - res.evicted_objects) * OBJ
    assert res.used_after == after.ratio <= 0.25
    assert await outbox_entries(svc) == 0
    if svc.backend.cluster:
        assert calls["alloc_free"] + calls["outbox_apply"] >= 1
    else:
        assert calls["outbox_apply"] == calls["alloc_free"] == calls["outbox_ack"] == 0
        assert calls["segment_info"] == 0
    # What is left reads back whole, children alive imply parents alive, blocks whole.
    await assert_parents_alive(svc, dict(b for c in mla for b in c))
    await assert_parents_alive(svc, dict(b for c in mha for b in c), keys_per_block=4)
    for blk, _ in (b for c in mha for b in c):
        flags = [await stored(svc, k) for k in block_keys(blk, 4)]
        assert all(flags) or not any(flags)
    await assert_clean(svc)


async def test_every_round_of_a_deep_pass_reads_after_its_frees(make_service: Any) -> None:
    """One leaf per call (script_batch_size 1): many rounds and waves, each deciding from the
    ratio its own call read; the pass stops exactly at its goal, as with a read per round."""
    svc = await evict_service(
        make_service, 100 * OBJ, num_shards=4, script_batch_size=1, eviction_ratio=0.3
    )
    blocks = chain("deep", 60)
    assert await put_blocks(svc, blocks) == 60
    res = await svc.evict_once()
    # 60 of 100 used, goal 0.5 - 0.3 = 0.2: 40 leaves go, from the chain's end.
    assert res.evicted_objects == 40
    assert (await svc.usage()).allocated == 20 * OBJ
    assert await outbox_entries(svc) == 0
    for i, (blk, _) in enumerate(blocks):
        assert await stored(svc, blk) == (i < 20)
    await assert_clean(svc)


async def test_batch_evict_frees_in_its_eviction_call(make_service: Any) -> None:
    """Mooncake's BatchEvict (the index off): its evict_keys call applies the frees too, so the
    outbox is empty when the pass returns and the allocator holds exactly what is left."""
    svc = await evict_service(
        make_service, 100 * OBJ, segments=2, enable_radix_tree=False, eviction_ratio=0.3
    )
    keys = [f"batch-{i}" for i in range(60)]
    assert await put_blocks(svc, [(k, "") for k in keys]) == 60
    recorded = record_calls(svc)
    res = await svc.evict_once()
    calls = Counter(c.name for c in recorded)
    assert res.mode == "batch" and 0 < res.evicted_objects < 60
    assert (await svc.usage()).allocated == (60 - res.evicted_objects) * OBJ
    assert await outbox_entries(svc) == 0
    left = [k for k in keys if await stored(svc, k)]
    assert len(left) == 60 - res.evicted_objects
    assert await svc.batch_exist_key(left) == [True] * len(left)
    if not svc.backend.cluster:
        assert calls["outbox_apply"] == calls["alloc_free"] == calls["outbox_ack"] == 0
    await assert_clean(svc)


async def test_a_long_non_ascii_segment_id_is_freed(make_service: Any) -> None:
    """A segment id of 200 characters and 400 bytes mounts (the limit counts characters): its
    frees must reach its allocator, not be dropped with their outbox entries (review)."""
    svc: MasterService = await make_service(
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=2_000,
        eviction_high_watermark_ratio=0.5,
        eviction_ratio=0.5,
        radix_eviction_target="watermark-ratio",
    )
    wide = "é" * 200
    await svc.mount_segment(
        Segment(wide, "wide-node", base=1 << 40, size=100 * OBJ, te_endpoint="e:1"), CLIENT
    )
    assert await put_blocks(svc, chain("wide", 60)) == 60
    res = await svc.evict_once()
    assert res.evicted_objects == 60
    assert (await svc.usage()).allocated == 0
    assert await outbox_entries(svc) == 0
    await assert_clean(svc)


async def test_a_call_that_read_no_segments_gives_no_ratio(
    make_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that did not read the segments (a cluster node: its frees go through the outbox)
    and freed nothing gives no used ratio: the goal reads it, rather than take 0 (review)."""
    svc = await evict_service(make_service, 100 * OBJ)
    assert await put_blocks(svc, chain("none", 3)) == 3

    async def unread(*_args: Any, **_kwargs: Any) -> list[lua.FencedCall]:
        return [lua.FencedCall(False, [(0, skipped)], [], [], [])]

    skipped = EvictedLeaf("lease", [], 0, 0, "", -1)
    monkeypatch.setattr(lua, "evict_leaves", unread)
    lease = svc.eviction.lease
    assert await lease.acquire()
    deps = EvictionDeps(svc.ctx, svc.radix, svc.allocator)
    write = await evict_leaves(deps, lease, EvictionResult(), [(0, "x" * 64)], False, ("eseg0",))
    assert write.outcomes[0].status == "lease"
    assert write.usage is None
    await lease.release()


async def test_a_fenced_call_frees_nothing(make_service: Any) -> None:
    """A fenced evict_leaves writes nothing: the leaf, its buffer and the allocator stay as they
    were. On a single Redis with the frees-here flag and a segment to read; a cluster node never
    gets the flag, so there it is the call in the cluster's own form."""
    svc = await evict_service(make_service, 100 * OBJ)
    blocks = chain("fenced", 3)
    assert await put_blocks(svc, blocks) == 3
    lease = svc.eviction.lease
    assert await lease.acquire()
    epoch, expires = lease.head()
    leaf = blocks[-1][0]
    here = [0, 0] if svc.backend.cluster else [1, 1, svc.keys.segment_anchor("eseg0")]
    head = [epoch - 1, expires, 0, *here, *NO_CLOCKS]
    [(_, reply)] = await svc.ctx.run_sharded(
        "evict_leaves", [(svc.shard_of_key(leaf), [leaf, 0])], head
    )
    assert int(reply[0]) == 0
    assert await stored(svc, leaf)
    assert (await svc.usage()).allocated == 3 * OBJ
    assert await outbox_entries(svc) == 0
    await lease.release()
    await assert_clean(svc)
