"""Calls over every shard (an eviction pass's reads and writes of all shards, the janitor's):
on a single Redis whose shards fit one call they go in the compact form (common.lua
``each_group``: shard 0's anchor, the shard count and the shared items once), which must answer
exactly as the call with one group per shard, on every backend; a cluster keeps one group per
shard (its shards sit on several nodes)."""

from __future__ import annotations

from typing import Any

from mooncake_redis import MasterService

from .eviction_helpers import chain, evict_service, put_blocks
from .helpers import record_calls


async def _both(svc: MasterService, script: str, head: list[Any], values: list[Any]) -> Any:
    """The replies of the compact form and of one group per shard, as (shard, group reply)."""
    ctx = svc.ctx
    n = ctx.keys.num_shards

    def groups(calls: list[tuple[list[int], Any]]) -> list[tuple[int, Any]]:
        out = []
        for idx, reply in calls:
            per_group = reply[1] if script == "evict_candidates" else reply  # [now, groups]
            out.extend(zip(idx, per_group))
        return sorted(out)

    every = await ctx.run_every_shard(script, head, values)
    per = await ctx.run_sharded(script, [(sh, values) for sh in range(n)], head)
    return groups(every), groups(per)


async def test_every_shard_answers_as_one_group_per_shard(make_service: Any) -> None:
    svc = await evict_service(make_service, 1 << 30, num_shards=16)
    # Blocks in most shards, chains of several levels: leaves and inner nodes in each index.
    for name in ("a", "b", "c", "d", "e", "f"):
        await put_blocks(svc, chain(name, 6))
    client, keys = svc.backend.client, svc.keys
    last = svc.ctx.config.num_shards - 1
    await client.rpush(keys.shard_key(0, "outbox"), "s|0000000000000000|p1")
    await client.rpush(keys.shard_key(last, "outbox"), "s|0000000000001000|p2", "s|x|p3")
    await client.zadd(keys.shard_key(last, "orphans"), {"a" * 64: 1})

    no_ahead = ["", 0, 0, 0, 0, 0, 0]
    every, per = await _both(svc, "evict_candidates", [4, 80, 0, *no_ahead], ["", ""])
    assert every == per
    assert sum(len(g[0]) for _, g in every) == 6  # each chain's leaf, from its shard's window
    every, per = await _both(svc, "evict_candidates", [4, 80, 5, *no_ahead], ["", ""])  # merge
    assert every == per
    took = sum(len(g[0]) for _, g in every)
    assert took == 5 or (svc.backend.cluster and took > 5)  # a cluster merges per node
    for script, head in [
        ("outbox_peek", [100]),
        ("evict_orphans", [10]),
        ("evict_pending", ["0"]),
        ("objects_complete", [keys.scan_pattern("obj"), 1]),
        ("objects_complete", [keys.scan_pattern("obj"), 0]),
    ]:
        every, per = await _both(svc, script, head, [])
        assert every == per, script
        assert any(g for _, g in every), script  # something to read in some shard
    every, _ = await _both(svc, "outbox_peek", [100], [])
    assert [len(g) for _, g in every] == [1] + [0] * (last - 1) + [2]


async def test_every_shard_is_one_short_call_on_a_single_redis(make_service: Any) -> None:
    svc = await evict_service(make_service, 1 << 30, num_shards=16)
    await put_blocks(svc, chain("x", 3))
    sent = record_calls(svc)
    done = await svc.eviction.evict_once(force=True)
    assert done.evicted_objects > 0
    assert sent
    anchor0 = svc.keys.anchor(0)
    compact = [(c.keys, c.args) for c in sent if "*" in c.args]
    if svc.backend.cluster:
        assert not compact  # several nodes: one group per shard, per node
    else:
        # evict_pending, the first evict_candidates and evict_publish at least.
        assert len(compact) >= 3
        for k, a in compact:
            star = a.index("*")
            assert k == [anchor0] and a[star + 1 : star + 3] == [anchor0, 16]
            assert len(a) <= star + 6
