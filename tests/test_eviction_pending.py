"""evict_pending: the per-pass count of what a previous evictor left undone (the unlink journal,
the outbox, the orphan roots). On a single Redis one ``EXISTS`` over every shard's three keys
answers a pass with nothing pending; a call with anything pending reads shard by shard. Both
paths must give the same counts, on fakeredis, Redis and Redis Cluster (where the shards' keys
sit in different slots and the per-shard read is the only one). On a single Redis the used
ratio's read (``segment_usage``) counts them too, so that a pass started from it reads nothing
more: the same counts again, and the pass acts on them."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis import lua_calls as lua
from mooncake_redis.models import Segment
from tests.helpers import record_calls


async def _counts(svc: MasterService) -> tuple[int, int, int]:
    p = await lua.evict_pending(svc.ctx)
    usage = await svc.usage()
    if svc.backend.cluster:
        assert usage.pending is None  # the segments' and shards' slots are not one call's
    else:
        assert usage.pending == p
    return p.unlinks, p.outbox, p.orphans


async def test_pending_counts_every_shard_on_both_paths(make_service: Any) -> None:
    svc: MasterService = await make_service(enable_radix_tree=True)
    client, keys = svc.backend.client, svc.keys
    last = svc.ctx.config.num_shards - 1
    assert await _counts(svc) == (0, 0, 0)  # the one-EXISTS path (single Redis)
    # Entries in the first and the last shard of the call, each kind in its own shard too.
    await client.rpush(keys.shard_key(last, "outbox"), "seg|0000000000000000|p1", "seg|x|p2")
    assert await _counts(svc) == (0, 2, 0)
    await client.rpush(keys.shard_key(0, "unlinks"), "[]")
    await client.zadd(keys.shard_key(0, "orphans"), {"a" * 64: 1, "b" * 64: 2})
    await client.zadd(keys.shard_key(5, "orphans"), {"c" * 64: 3})
    assert await _counts(svc) == (1, 2, 3)
    await client.delete(
        keys.shard_key(last, "outbox"), keys.shard_key(0, "unlinks"), keys.shard_key(0, "orphans")
    )
    assert await _counts(svc) == (0, 0, 1)
    await client.delete(keys.shard_key(5, "orphans"))
    assert await _counts(svc) == (0, 0, 0)


@pytest.mark.parametrize("num_shards", [1, 8])
async def test_a_pass_acts_on_what_the_used_ratio_read_counted(
    make_service: Any, num_shards: int
) -> None:
    """A pass given the used ratio's read (as the replay and the coordinator start one) takes
    the pending counts from it: an outbox entry is drained and an orphan root is evicted before
    any leaf, with no evict_pending call on a single Redis (one per node on a cluster)."""
    svc: MasterService = await make_service(enable_radix_tree=True, num_shards=num_shards)
    await svc.mount_segment(Segment("s", "s", 1 << 30, 1 << 20), "c")
    size = 1 << 16
    parent, keys = "f" * 64, [f"{i:064x}" for i in range(1, 13)]
    for i, key in enumerate([parent, *keys]):  # 12 one-block chains; the first below parent
        await svc.put_start("c", key, [size], {"parent_block_hash": parent if i == 1 else ""})
        await svc.put_end("c", key)
    await svc.remove(parent)  # keys[0] is an orphan root now
    assert (await lua.evict_pending(svc.ctx)).orphans == 1
    calls = record_calls(svc)
    usage = await svc.usage()
    lease = svc.eviction.lease
    assert await lease.acquire()
    res = await svc.eviction.run_eviction_pass(lease, force=True, usage=usage)
    names = [c.name for c in calls]
    if svc.backend.cluster:
        assert names.count("evict_pending") > 0  # one call per Redis node
    else:
        assert "evict_pending" not in names
    assert keys[0] in res.evicted_keys  # the orphan went first
    assert res.evicted_objects >= 1
    assert await _counts(svc) == (0, 0, 0)
