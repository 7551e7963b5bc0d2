"""The ``tiered`` leaf policy in the store (fakeredis, Redis and Cluster): fresh leaves go
before exposed ones and those before found ones, in logical time (the clocks each pass
publishes), a fresh leaf put since the last pass waits (the logical put grace), and a change
of policy rescores the index."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.errors import MooncakeError
from mooncake_redis.eviction.policy import TieredPolicy, get_policy
from tests.eviction_helpers import OBJ, evict_service, put_blocks
from tests.helpers import h, record_calls


async def _warm(svc: MasterService, n: int) -> None:
    """n roots, one evicted: the pass publishes a turnover of n - 1 blocks and clock 1."""
    await put_blocks(svc, [(h(f"warm{i}"), "") for i in range(n)])
    res = await svc.evict_once(max_objects=1)
    assert res.evicted_objects == 1
    st = await svc.backend.client.hgetall(svc.keys.anchor(0))
    assert {k.decode(): v.decode() for k, v in st.items()}["tto"] == str(n - 1)


async def test_tiered_fresh_then_exposed_then_found(make_service: Any) -> None:
    svc = await evict_service(
        make_service, 40 * OBJ, eviction_policy="tiered:0/1/1.75/0", default_kv_lease_ttl_ms=0
    )
    await _warm(svc, 10)  # 9 warm roots left, stamp 0
    found, parent, child, fresh = h("found"), h("parent"), h("child"), h("fresh")
    await put_blocks(svc, [(found, ""), (parent, ""), (child, parent), (fresh, "")])
    assert await svc.exist_key(found)  # stamp 1 + 1.75 x 9
    res = await svc.evict_once(max_objects=9)  # the warm roots: stamp 0, fresh
    assert res.policy == "tiered:0/1/1.75/0" and len(res.evicted_keys) == 9
    assert not {found, parent, child, fresh} & set(res.evicted_keys)
    # turnover 4 now; child and fresh score 1, parent once exposed 1 + 4, found 1 + 15.75
    res = await svc.evict_once(max_objects=2)
    assert set(res.evicted_keys) == {child, fresh}
    assert (await svc.evict_once(max_objects=1)).evicted_keys == [parent]
    assert (await svc.evict_once(max_objects=1)).evicted_keys == [found]


async def test_tiered_found_leaf_outlives_lru_by_a_bounded_protection(make_service: Any) -> None:
    """Protections in turnovers: a found leaf goes once the clock has passed its stamp plus
    its protection, however many times it was found (a bonus, never unbounded)."""
    svc = await evict_service(
        make_service, 60 * OBJ, eviction_policy="tiered:0/0/1/0", default_kv_lease_ttl_ms=0
    )
    await _warm(svc, 3)  # turnover 2, clock 1
    hot = h("hot")
    await put_blocks(svc, [(hot, "")])
    for _ in range(5):
        assert await svc.exist_key(hot)  # 1 + 1 x 2 = 3
    newer = [h(f"new{i}") for i in range(6)]
    await put_blocks(svc, [(b, "") for b in newer[:3]])  # stamp 1
    res = await svc.evict_once(max_objects=4)  # 2 warm (0), 3 new (1), not hot (3)
    assert hot not in res.evicted_keys and len(res.evicted_keys) == 4
    await put_blocks(svc, [(b, "") for b in newer[3:]])  # stamp 5 > 3
    res = await svc.evict_once(max_objects=2)
    assert hot in res.evicted_keys


@pytest.mark.parametrize("spec", ["tiered", "tiered:0/1/1.75/0"])
async def test_tiered_grace_keeps_a_leaf_put_since_the_last_pass(
    make_service: Any, spec: str
) -> None:
    """The put grace is logical: a fresh leaf put since the evictor's last pass (its stamp
    not behind the published clock) goes only after every leaf that is not, however long ago
    by the clock on the wall; once a pass has evicted something since, it is a leaf as any.
    Grace 0: plain scores."""
    svc = await evict_service(
        make_service, 40 * OBJ, eviction_policy=spec, default_kv_lease_ttl_ms=0
    )
    await _warm(svc, 10)  # 9 warm roots left, stamp 0; clock 1, turnover 9
    hot, fresh = h("grace-hot"), h("grace-fresh")
    await put_blocks(svc, [(hot, "")])
    assert await svc.exist_key(hot)  # found: stamp 1, score 1 + 1.75 x 9
    assert len((await svc.evict_once(max_objects=9)).evicted_keys) == 9  # the warm roots
    await put_blocks(svc, [(fresh, "")])  # stamp 10 = the clock: young; score 10 < 16.75
    first = (await svc.evict_once(max_objects=1)).evicted_keys
    assert first == ([hot] if spec == "tiered" else [fresh])
    # the only one left goes (a young leaf is taken once no other is left)
    assert (await svc.evict_once(max_objects=1)).evicted_keys == [fresh if first == [hot] else hot]


@pytest.mark.parametrize("spec", ["tiered", "tiered:0/1/1.75/1e9"])
async def test_tiered_grace_ends_with_the_next_pass(make_service: Any, spec: str) -> None:
    """With the default grace (1 block) a fresh leaf is young until a pass evicts something
    after its put; with a grace of 1e9 blocks every fresh leaf stays young, and a found one
    goes first."""
    svc = await evict_service(
        make_service, 40 * OBJ, eviction_policy=spec, default_kv_lease_ttl_ms=0
    )
    await _warm(svc, 2)  # 1 warm root left, stamp 0; clock 1, turnover 1
    fresh, hot = h("grace-f"), h("grace-h")
    await put_blocks(svc, [(fresh, ""), (hot, "")])  # stamp 1: young
    assert await svc.exist_key(hot)  # found: 1 + 1.75 x 1
    first = (await svc.evict_once(max_objects=1)).evicted_keys
    second = (await svc.evict_once(max_objects=1)).evicted_keys
    if spec == "tiered":
        # the warm root (score 0, put before the last pass); then, clock 2, fresh (score 1)
        # is young no more and goes before hot (2.75)
        assert {fresh, hot}.isdisjoint(first) and second == [fresh]
    else:  # every fresh leaf is young: hot goes first, then the lowest young score
        assert first == [hot] and second != [fresh]


async def test_a_change_of_policy_rescores_the_leaves(make_service: Any) -> None:
    svc = await evict_service(make_service, 40 * OBJ, eviction_policy="lru")  # scored by ms
    blocks = [h(f"sw{i}") for i in range(5)]
    await put_blocks(svc, [(b, "") for b in blocks])
    tiered = await make_service(
        enable_radix_tree=True, eviction_policy="tiered", default_kv_lease_ttl_ms=2_000
    )  # its start recorded the policy and rescored the shards' leaves
    assert await tiered.eviction.record_policy() == 0  # recorded already: nothing to redo
    scores = []
    for shard in range(tiered.keys.num_shards):
        zset = await tiered.backend.client.zrange(
            tiered.keys.shard_key(shard, "leaves"), 0, -1, withscores=True
        )
        scores.extend(s for _, s in zset)
    assert len(scores) == 5 and max(scores) < 1e6  # blocks, not ms
    assert await svc.eviction.record_policy() == 5  # and back to lru: ms again


def test_tiered_spec() -> None:
    assert get_policy("tiered") == TieredPolicy()
    assert get_policy("tiered").describe() == "tiered:0/1/1.75"  # grace 1: since the last pass
    p = get_policy("tiered:0/1/2/50")
    assert (p.describe(), p.tier_offsets()) == ("tiered:0/1/2/50", "0.0/1.0/2.0")
    assert isinstance(p, TieredPolicy) and p.grace == 50
    for bad in ("tiered:1/2", "tiered:0/-1/1", "tiered:x/1/1", "tiered:0/1/inf", "tiered:0/1/1/-1"):
        with pytest.raises(MooncakeError, match="tiered"):
            get_policy(bad)


async def _clocks_run(svc: MasterService) -> tuple[list[Any], int, int]:
    """Passes of several goals over chains, roots and a found block: per pass the keys it
    evicted and every shard's turnover and clock after it; and the evict_publish calls and
    passes run."""
    calls = record_calls(svc)
    blocks = [(h(f"root{i}"), "") for i in range(12)]
    for c in range(4):
        top = h(f"top{c}")
        blocks += [(top, ""), (h(f"mid{c}"), top), (h(f"low{c}"), h(f"mid{c}"))]
    await put_blocks(svc, blocks)
    assert await svc.exist_key(h("root3"))  # found: a later tier
    out: list[Any] = []
    passes = 0
    for goal in [{"max_objects": 1}, {"max_objects": 5}, {"force": True}, {"max_objects": 3}]:
        res = await svc.evict_once(**goal)
        passes += 1
        stats = []
        for shard in range(svc.keys.num_shards):
            row = await svc.backend.client.hmget(svc.keys.anchor(shard), ["tto", "tlc"])
            stats.append(row)
        out.append((sorted(res.evicted_keys), res.evicted_leaves, stats))
        await put_blocks(svc, [(h(f"again{passes}"), "")])
    return out, [c.name for c in calls].count("evict_publish"), passes


@pytest.mark.parametrize("shards", [1, 8])
async def test_clocks_published_by_the_call_that_met_the_goal(
    make_service: Any, monkeypatch: pytest.MonkeyPatch, shards: int
) -> None:
    """On a single Redis the eviction call that meets the pass's goal publishes the clocks
    itself (when its leaves cover every shard): the same keys go and every shard holds the
    same turnover and clock after each pass as with evict_publish after the pass. One shard
    uses the fold in every pass; at 8 shards a call's leaves seldom cover every shard, and the
    pass publishes as before (the same values either way)."""
    from mooncake_redis.eviction.goal import Goal
    from mooncake_redis.testing.probes import wipe

    cfg = {"num_shards": shards, "default_kv_lease_ttl_ms": 0, "eviction_ratio": 0.25}
    svc = await evict_service(make_service, 40 * OBJ, **cfg)
    with monkeypatch.context() as m:
        m.setattr(Goal, "clock_ask", lambda self: None)  # the pass publishes: the reference
        ref, ref_publishes, passes = await _clocks_run(svc)
    assert ref_publishes == passes or svc.backend.cluster  # a cluster: one per Redis node
    await wipe(svc)
    svc = await evict_service(make_service, 40 * OBJ, **cfg)
    got, publishes, _ = await _clocks_run(svc)
    assert got == ref
    assert any(evicted for _, evicted, _ in got)
    if svc.backend.cluster:
        assert publishes == ref_publishes  # no call of one Redis node sees every shard
    elif shards == 1:
        assert publishes == 0  # every goal was met by an eviction call
