"""evict_leaves' one-DEL path for a block hash that holds one leaf, its own block key and that
key's object (an MLA block), and its deferred per-shard writes (evict_flush: the counters in one
HMGET and one HSET, the index removals and outbox entries in one command each).

The general path (store_erase, radix_remove_key, radix_collapse, field by field) stays for
every other leaf; a hash with a field neither the object nor the node owns takes it too, which
lets one pass run both paths side by side here. Both must leave the same store: counters equal
to a recount, indexes without the evicted blocks, the allocator freed, fsck clean; on fakeredis,
Redis and Redis Cluster."""

from __future__ import annotations

from typing import Any

from mooncake_redis import MasterService
from tests.eviction_helpers import (
    OBJ,
    assert_clean,
    assert_parents_alive,
    chain,
    evict_service,
    put_blocks,
)

COUNTERS = ("objects", "bytes", "nodes", "rkeys", "evicted_keys", "evicted_bytes")
INDEXES = ("leaves", "lru", "processing", "orphans", "outbox")


async def _block_hash(svc: MasterService, blk: str) -> dict[bytes, bytes]:
    got: dict[bytes, bytes] = await svc.backend.client.hgetall(
        svc.keys.node(svc.shard_of_key(blk), blk)
    )
    return got


async def _index_sizes(svc: MasterService) -> dict[str, int]:
    client = svc.backend.client
    sizes = dict.fromkeys(INDEXES, 0)
    for shard in range(svc.ctx.config.num_shards):
        for name in INDEXES:
            key = svc.keys.shard_key(shard, name)
            kind = (await client.type(key)).decode()
            if kind == "zset":
                sizes[name] += await client.zcard(key)
            elif kind == "list":
                sizes[name] += await client.llen(key)
    return sizes


async def _recount(svc: MasterService, blocks: list[str]) -> dict[str, int]:
    """What the shard counters must say, from the block hashes themselves."""
    objects = nodes = 0
    for blk in blocks:
        fields = await _block_hash(svc, blk)
        objects += b"i" in fields  # the put id: every object has one
        nodes += b"t" in fields  # the created ms: every node has one
    return {"objects": objects, "bytes": objects * OBJ, "nodes": nodes, "rkeys": objects}


async def test_both_paths_leave_the_same_store(make_service: Any) -> None:
    """Chains of plain block hashes (one DEL each) and chains whose hashes carry a foreign field
    (the general path, which leaves that field behind) over 16 shards, evicted whole in one
    pass: each chain leaf first, every counter back to 0, evicted_* counting both kinds, no
    index entry and no outbox entry left, the segments empty, fsck clean."""
    svc = await evict_service(make_service, 150 * OBJ, num_shards=16)
    plain = [chain(f"plain{c}-", 12) for c in range(4)]
    foreign = [chain(f"foreign{c}-", 12) for c in range(4)]
    tree = [b for c in plain + foreign for b in c]
    assert await put_blocks(svc, tree) == len(tree)
    client = svc.backend.client
    for blk, _ in (b for c in foreign for b in c):
        await client.hset(svc.keys.node(svc.shard_of_key(blk), blk), "zz", "kept")
    res = await svc.evict_once()
    assert res.evicted_objects == len(tree) == res.evicted_leaves
    order = [leaf for r in res.round_leaves for leaf in r]
    for c in plain + foreign:
        assert [x for x in order if x in {b for b, _ in c}] == [b for b, _ in reversed(c)]
    totals = await svc.shard_totals(*COUNTERS)
    assert totals == {
        "objects": 0,
        "bytes": 0,
        "nodes": 0,
        "rkeys": 0,
        "evicted_keys": len(tree),
        "evicted_bytes": len(tree) * OBJ,
    }
    assert await _index_sizes(svc) == dict.fromkeys(INDEXES, 0)
    assert (await svc.usage()).ratio == 0
    for blk, _ in (b for c in plain for b in c):
        assert await _block_hash(svc, blk) == {}
    for blk, _ in (b for c in foreign for b in c):
        assert await _block_hash(svc, blk) == {b"zz": b"kept"}
        await client.delete(svc.keys.node(svc.shard_of_key(blk), blk))
    await assert_clean(svc)


async def test_a_partial_pass_keeps_the_counters_equal_to_a_recount(make_service: Any) -> None:
    """A pass that stops at its goal: per leaf one DEL, the counters written once per shard and
    call, and they still equal a recount of the blocks left; children alive imply parents
    alive; the blocks left read back whole."""
    svc = await evict_service(make_service, 120 * OBJ, num_shards=16, eviction_ratio=0.25)
    chains = [chain(f"c{c}-", 10) for c in range(10)]
    tree = [b for c in chains for b in c]
    assert await put_blocks(svc, tree) == len(tree)
    res = await svc.evict_once()
    assert 0 < res.evicted_objects < len(tree)
    blocks = [b for b, _ in tree]
    left = await _recount(svc, blocks)
    assert left["objects"] == len(tree) - res.evicted_objects
    totals = await svc.shard_totals(*COUNTERS)
    assert {k: totals[k] for k in left} == left
    assert totals["evicted_keys"] == res.evicted_objects
    assert totals["evicted_bytes"] == res.evicted_objects * OBJ
    await assert_parents_alive(svc, dict(tree))
    alive = [b for b in blocks if b"i" in await _block_hash(svc, b)]
    assert await svc.batch_exist_key(alive) == [True] * len(alive)
    await assert_clean(svc)


async def test_a_block_hash_with_other_keys_takes_the_general_path(make_service: Any) -> None:
    """MHA blocks (several keys per node, each object in its own hash) are not one-DEL leaves:
    the general path evicts them whole, the counters go back to 0."""
    svc = await evict_service(make_service, 100 * OBJ, num_shards=16)
    tree = chain("mha", 8) + chain("mhb", 8)
    assert await put_blocks(svc, tree, keys_per_block=4) == 4 * len(tree)
    res = await svc.evict_once()
    assert res.evicted_objects == 4 * len(tree)
    totals = await svc.shard_totals(*COUNTERS)
    assert totals["objects"] == totals["nodes"] == totals["rkeys"] == totals["bytes"] == 0
    assert totals["evicted_keys"] == 4 * len(tree)
    assert await _index_sizes(svc) == dict.fromkeys(INDEXES, 0)
    await assert_clean(svc)
