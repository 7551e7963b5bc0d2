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
    the pending counts from it, with no evict_pending call on a single Redis (one per node on a
    cluster): the newest leaf, an orphan root, goes before the oldest, and then an outbox entry
    is drained."""
    svc: MasterService = await make_service(enable_radix_tree=True, num_shards=num_shards)
    await svc.mount_segment(Segment("s", "s", 1 << 30, 1 << 20), "c")
    size = 1 << 16
    parent, orphan = "e" * 64, "f" * 64
    roots = [f"{i:064x}" for i in range(1, 13)]
    for key, above in [(k, "") for k in roots] + [(parent, ""), (orphan, parent)]:
        await svc.put_start("c", key, [size], {"parent_block_hash": above})
        await svc.put_end("c", key)
    await svc.remove(parent)  # the newest block is an orphan root now
    assert await _counts(svc) == (0, 0, 1)
    lease = svc.eviction.lease
    assert await lease.acquire()

    async def one_pass() -> list[str]:
        calls = record_calls(svc)
        usage = await svc.usage()
        res = await svc.eviction.run_eviction_pass(lease, max_objects=1, usage=usage)
        names = [c.name for c in calls]
        if svc.backend.cluster:
            assert names.count("evict_pending") > 0  # one call per Redis node
        else:
            assert "evict_pending" not in names
        return res.evicted_keys

    assert await one_pass() == [orphan]  # without the count: the oldest root
    await svc.backend.client.rpush(svc.keys.shard_key(0, "outbox"), "s|0000000000000000|none")
    assert await _counts(svc) == (0, 1, 0)
    assert await one_pass() == [roots[0]]
    assert await _counts(svc) == (0, 0, 0)  # drained (the put id owns no buffer: none freed)
    assert (await svc.usage()).allocated == 11 * size


async def test_counts_over_thousands_of_shards(make_service: Any) -> None:
    """More shards than one EXISTS may name (unpack's limit in Redis's Lua is about 8,000
    values: 3 keys a shard): the used ratio's read and evict_pending still answer, counting an
    entry in the last shard (a cluster reads per shard group, and not in the used ratio)."""
    svc: MasterService = await make_service(num_shards=3000, script_batch_size=4096)
    await svc.mount_segment(Segment("s", "s", 1 << 30, 1 << 20), "c")
    await svc.backend.client.rpush(svc.keys.shard_key(2999, "outbox"), "s|x|p")
    one = None if svc.backend.cluster else lua.Pending(0, 1, 0)
    assert (await svc.usage()).pending == one
    assert await lua.evict_pending(svc.ctx) == lua.Pending(0, 1, 0)
