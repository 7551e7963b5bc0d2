"""evict_pending: the per-pass count of what a previous evictor left undone (the unlink journal,
the outbox, the orphan roots). On a single Redis one ``EXISTS`` over every shard's three keys
answers a pass with nothing pending; a call with anything pending reads shard by shard. Both
paths must give the same counts, on fakeredis, Redis and Redis Cluster (where the shards' keys
sit in different slots and the per-shard read is the only one)."""

from __future__ import annotations

from typing import Any

from mooncake_redis import MasterService
from mooncake_redis import lua_calls as lua


async def _counts(svc: MasterService) -> tuple[int, int, int]:
    p = await lua.evict_pending(svc.ctx)
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
