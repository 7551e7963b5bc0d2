"""Issue 14 item 4: orphans (a stored object whose parent block has no object).

Eviction never makes one, but explicit operations may: ``remove(parent)``, the parent's segment
unmounted or its client expired, a parent put in the same batch then revoked or abandoned (the
guard accepted the child because the parent was in its batch). Before, fsck reported nothing
and the put guard accepted children under them. Now (the policy, docs/store.md):
- fsck counts them (``orphans``: objects of orphan roots, ``orphan_roots``,
  ``orphaned_subtree_objects``) and what the shards' orphan index misses or keeps wrongly
  (``orphan_roots_unindexed``, ``orphan_marks_stale``: 0 after every operation here);
- the put guard refuses a child of an orphan;
- an orphaned subtree can never be a prefix hit, so eviction takes it first (leaf-first inside
  it); ``orphan_eviction = "eager"`` removes it at the next janitor interval without pressure;
- a parent put again adopts its children (they are no orphans any more);
- the replay's health samples count the same orphans.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.replay.metrics import analyse
from tests.helpers import hashes_in_shard

MB = 1 << 20


async def put(svc: MasterService, block: str, parent: str = "", seg: str = "", client: str = "c"):  # type: ignore[no-untyped-def]
    cfg = ReplicateConfig(parent_block_hash=parent, preferred_segment=seg)
    await svc.put_start(client, block, [64], cfg)
    await svc.put_end(client, block)


async def chain(svc: MasterService, tag: str, n: int, parent: str = "") -> list[str]:
    """n blocks, each in another shard, each under the previous one."""
    out = []
    for i in range(n):
        b = next(hashes_in_shard(svc, (i * 3 + 1) % svc.keys.num_shards, f"{tag}{i}"))
        await put(svc, b, parent)
        out.append(b)
        parent = b
    return out


async def orphan_counts(svc: MasterService) -> tuple[int, int, int]:
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]
    c = report.counts
    assert c["orphan_roots_unindexed"] == 0 and c["orphan_marks_stale"] == 0, c  # index exact
    return c["orphans"], c["orphan_roots"], c["orphaned_subtree_objects"]


async def refuses_child(svc: MasterService, parent: str) -> None:
    child = next(hashes_in_shard(svc, 5, "child-of-" + parent[:8]))
    with pytest.raises(MooncakeError) as exc:
        await put(svc, child, parent)
    assert exc.value.code == ErrorCode.OBJECT_NOT_FOUND, exc.value
    assert "orphan" in exc.value.message


@pytest.fixture
async def svc(make_service: Any) -> MasterService:
    s: MasterService = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0)
    await s.mount_segment(Segment("s1", "s1", 1 << 40, MB), "c")
    return s


async def test_remove_parent_orphans_are_counted_refused_and_evicted_first(
    svc: MasterService,
) -> None:
    old = await chain(svc, "old", 2)  # older leaves: plain LRU would take them first
    a, b, c = await chain(svc, "abc", 3)
    await svc.remove(a)
    assert await orphan_counts(svc) == (1, 1, 2)  # b is the root, b and c its subtree
    await refuses_child(svc, b)
    # Health samples of the replay count the same orphan (its parent block is not stored).
    stored = await svc.complete_objects()
    sample = analyse(stored, {old[1]: old[0], b: a, c: b}, objects_per_block=1)
    assert sample.orphans == 1 and sample.stored == 4
    # A pass takes the orphaned subtree (leaf first) before any older leaf.
    res = await svc.evict_once(force=True, max_objects=2)
    assert set(res.evicted_keys) == {b, c} and res.orphan_objects == 2, res
    assert await svc.batch_exist_key(old) == [True, True]
    assert await orphan_counts(svc) == (0, 0, 0)
    assert (await fsck(svc)).counts["nodes"] == 2


async def test_parent_put_again_adopts_its_children(svc: MasterService) -> None:
    a, _b, c = await chain(svc, "re", 3)
    await svc.remove(a)
    assert (await orphan_counts(svc))[1] == 1
    await put(svc, a)  # the parent block is back: b and c are no orphans
    assert await orphan_counts(svc) == (0, 0, 0)
    await put(svc, next(hashes_in_shard(svc, 6, "grandchild")), c)


async def test_unmount_and_client_expiry_of_the_parent(make_service: Any) -> None:
    svc = await make_service(
        enable_radix_tree=True, default_kv_lease_ttl_ms=0, client_live_ttl_ms=1500
    )
    await svc.mount_segment(Segment("s1", "s1", 1 << 40, MB), "c1")
    await svc.mount_segment(Segment("s2", "s2", 1 << 41, MB), "c2")
    await svc.mount_segment(Segment("s3", "s3", 1 << 42, MB), "c3")
    p1 = next(hashes_in_shard(svc, 1, "p1"))
    q1 = next(hashes_in_shard(svc, 2, "q1"))
    p3 = next(hashes_in_shard(svc, 3, "p3"))
    q3 = next(hashes_in_shard(svc, 4, "q3"))
    await put(svc, p1, seg="s1", client="c1")
    await put(svc, q1, p1, seg="s2", client="c2")
    await put(svc, p3, seg="s3", client="c3")
    await put(svc, q3, p3, seg="s2", client="c2")
    await svc.unmount_segment("s1", "c1")  # p1 goes with its segment: q1 is an orphan
    assert await orphan_counts(svc) == (1, 1, 1)
    await refuses_child(svc, q1)
    # c3 stops pinging: its segment (holding p3) is unmounted by the janitor, q3 is an orphan.
    # (until the janitor has expired c3: the ttl is loose so that c2, pinged here, outlives the
    # puts above on a loaded machine)
    for _ in range(100):
        await svc.ping("c2")
        await svc.run_janitor_once(force=True)
        if [s.id for s in await svc.segment_stats()] == ["s2"]:
            break
        await asyncio.sleep(0.1)
    assert [s.id for s in await svc.segment_stats()] == ["s2"]
    assert await orphan_counts(svc) == (2, 2, 2)
    res = await svc.evict_once(force=True, max_objects=1)
    assert res.orphan_objects >= 1 and set(res.evicted_keys) <= {q1, q3}


async def test_parent_revoked_or_abandoned_in_the_same_batch(make_service: Any) -> None:
    svc = await make_service(
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=0,
        put_start_discard_timeout_ms=200,
        put_start_release_timeout_ms=300,
    )
    await svc.mount_segment(Segment("s1", "s1", 1 << 40, MB), "c")
    p, q = next(hashes_in_shard(svc, 1, "bp")), next(hashes_in_shard(svc, 2, "bq"))
    r, s = next(hashes_in_shard(svc, 3, "br")), next(hashes_in_shard(svc, 4, "bs"))
    cfgs = [ReplicateConfig(), ReplicateConfig(parent_block_hash=p)]
    res = await svc.batch_put_start("c", [p, q], [[64], [64]], cfgs)
    assert not any(isinstance(x, MooncakeError) for x in res)
    await svc.put_end("c", q)
    await svc.put_revoke("c", p)  # revoked: q stays, under a parent with no object
    assert await orphan_counts(svc) == (1, 1, 1)
    await refuses_child(svc, q)
    cfgs = [ReplicateConfig(), ReplicateConfig(parent_block_hash=r)]
    res = await svc.batch_put_start("c", [r, s], [[64], [64]], cfgs)
    assert not any(isinstance(x, MooncakeError) for x in res)
    await svc.put_end("c", s)  # r is never ended: the janitor discards it
    await asyncio.sleep(0.3)
    assert (await svc.run_janitor_once(force=True)).discarded_puts == 1
    assert await orphan_counts(svc) == (2, 2, 2)
    await refuses_child(svc, s)


async def test_eager_orphan_eviction_and_repair_of_a_lost_mark(make_service: Any) -> None:
    svc = await make_service(
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=0,
        orphan_eviction="eager",
        janitor_interval_ms=50,
    )
    await svc.mount_segment(Segment("s1", "s1", 1 << 40, MB), "c")
    a, b, c = await chain(svc, "eager", 3)
    await svc.remove(a)
    # A crash between the erase and its mark continuation leaves the root unmarked: fsck
    # counts it and --repair marks it.
    shard = svc.keys.shard_of(b)
    await svc.backend.client.zrem(svc.keys.shard_key(shard, "orphans"), b)
    report = await fsck(svc)
    assert report.clean and report.counts["orphan_roots_unindexed"] == 1, report.to_dict()
    await fsck(svc, repair=True)
    assert await orphan_counts(svc) == (1, 1, 2)
    # No pressure at all, yet the next pass takes the orphaned subtree.
    await asyncio.sleep(0.06)
    res = await svc.evict_once()
    assert res.reason == "orphans" and set(res.evicted_keys) == {b, c}, res
    assert await orphan_counts(svc) == (0, 0, 0)
