"""Lease grants of the read path compare stored times as decimal strings (store_grant_leases,
radix_touch): a stored lease, soft pin or node score that already reaches further is kept
whatever its digit count, a shorter one is extended, and the leaf index follows the policy
(lru: the node's newest lease; tiered: the found tier at the shard's clock)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h


@pytest.mark.parametrize("policy", ["lru", "tiered"])
async def test_grants_compare_times_as_strings(make_service: Any, policy: str) -> None:
    svc: MasterService = await make_service(
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=5_000,
        default_kv_soft_pin_ttl_ms=9_000,
        eviction_policy=policy,
    )
    await svc.mount_segment(Segment("s0", "n0", 1 << 40, 1 << 24, "10.0.0.1:1", "tcp"), "c")
    blk = h(f"grants-{policy}")
    await svc.put_start("c", blk, [64], ReplicateConfig(with_soft_pin=True))
    await svc.put_end("c", blk)
    c, ks = svc.backend.client, svc.keys
    shard = svc.shard_of_key(blk)
    okey, nkey = ks.obj(shard, blk), ks.node(shard, blk)
    leaves = ks.shard_key(shard, "leaves")

    async def grant(exist: bool) -> None:
        if exist:
            assert await svc.batch_exist_key([blk]) == [True]
        else:
            [got] = await svc.batch_get_replica_list([blk])
            assert len(getattr(got, "replicas", [])) == 1, got

    # Same digit count, lexically later (13 digits, 10 days ahead): kept, and the node follows.
    far = str(int(time.time() * 1000) + 10 * 86_400_000)
    await c.hset(okey, mapping={"l": far, "sp": far})
    hits0 = int(await c.hget(nkey, "h") or 0)
    await grant(exist=True)
    assert (await c.hget(okey, "l")).decode() == far
    assert (await c.hget(okey, "sp")).decode() == far
    assert (await c.hget(nkey, "s")).decode() == far
    assert int(await c.hget(nkey, "h")) == hits0 + 1
    # Fewer digits (an old time): extended to now + ttl, the soft pin to now + its ttl.
    await c.hset(okey, mapping={"l": "5", "sp": "7"})
    before = int(time.time() * 1000)
    await grant(exist=False)
    lease, soft = int(await c.hget(okey, "l")), int(await c.hget(okey, "sp"))
    assert before + 5_000 - 1_000 <= lease <= int(time.time() * 1000) + 5_000 + 1_000
    assert lease < soft  # the soft pin ttl is the longer
    assert int(await c.hget(nkey, "h")) == hits0 + 2
    assert (await c.hget(nkey, "s")).decode() == far  # the node's newest lease only grows
    score = await c.zscore(leaves, blk)
    if policy == "lru":
        assert score == float(far)
    else:  # the found tier (hits > 0) at the shard's clock: stamp k + Y x turnover
        stats = await c.hmget(ks.shard_key(shard, "stats"), ["tof", "tto", "tlc"])
        off = [float(x) for x in stats[0].decode().split("/")]
        turnover, clock = float(stats[1] or 0), float(stats[2] or 0)
        assert float(await c.hget(nkey, "k")) == clock
        assert score == clock + off[2] * turnover
