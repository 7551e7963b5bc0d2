"""Radix-aware eviction on three backends: the RFC example round by round, a 400-deep chain,
a wide tree with mixed leases, pins, registered-but-not-stored keys, multi-key blocks, the
no-tree fallback, policies, and concurrency with registration."""

from __future__ import annotations

import asyncio
from typing import Any

from mooncake_redis import MasterService
from tests.eviction_helpers import (
    OBJ,
    assert_clean,
    assert_parents_alive,
    block_keys,
    chain,
    evict_service,
    put_blocks,
    stored,
)
from tests.helpers import h, record_calls


async def test_rfc_example_round_by_round(make_service: Any) -> None:
    A, B, C, D, E, F = (h(x) for x in "ABCDEF")
    tree = {A: "", B: A, C: A, D: B, E: B, F: C}
    svc = await evict_service(make_service, 10 * OBJ)
    await put_blocks(svc, list(tree.items()))
    assert await svc.exist_key(F)  # F leased: its whole path must stay
    res = await svc.evict_once()
    assert res.mode == "radix" and res.reason == "watermark"
    # D and E first; B becomes a leaf once both are chosen and goes in the same round
    order = [leaf for r in res.round_leaves for leaf in r]
    assert sorted(order[:2]) == sorted([D, E]) and order[2:] == [B]
    assert sorted(res.evicted_keys) == sorted([B, D, E])
    assert res.cascade_depth == 2 and res.bytes == 3 * OBJ and res.evicted_leaves == 3
    for k in (A, C, F):
        assert await stored(svc, k)
    assert (await svc.usage()).allocated == 3 * OBJ
    await assert_parents_alive(svc, tree)
    await assert_clean(svc)


async def test_chain_400_deep_leaf_first(make_service: Any) -> None:
    blocks = chain("deep", 400)
    svc = await evict_service(make_service, 500 * OBJ, eviction_ratio=0.5, num_shards=16)
    await put_blocks(svc, blocks)
    tree = dict(blocks)
    res = await svc.evict_once()
    assert res.evicted_objects == 400 and res.cascade_depth == 400
    # leaf first: every round evicted exactly the current leaf, deepest first
    order = [leaf for r in res.round_leaves for leaf in r]
    assert order == [b for b, _ in reversed(blocks)]
    assert res.fallback_objects == 0
    assert (await svc.usage()).allocated == 0
    await assert_parents_alive(svc, tree)
    await assert_clean(svc)


async def test_last_pick_of_a_pass_reads_no_parent(make_service: Any) -> None:
    """A pass whose one round covers its goal reads nothing above its last pick: that parent
    could only go in a later round (read then, by name, if the pass has one)."""
    svc = await evict_service(make_service, 100 * OBJ, num_shards=16)
    blocks = chain("lp", 3) + chain("lq", 3)
    await put_blocks(svc, blocks)
    calls = record_calls(svc)
    res = await svc.evict_once(max_objects=1)
    assert res.evicted_objects == 1 and res.rounds == 1
    names = [c.name for c in calls]
    assert "evict_ancestors" not in names and "evict_leaf_info" not in names
    # Two leaves in one round: the first pick's parent is read, the second's is not (on a
    # single Redis the pass's first candidates read reads it ahead: no evict_ancestors call).
    calls.clear()
    res = await svc.evict_once(max_objects=2)
    assert res.evicted_objects == 2 and res.rounds == 1
    names = [c.name for c in calls]
    reads = 1 if svc.backend.cluster else 0
    assert names.count("evict_ancestors") == reads and "evict_leaf_info" not in names
    await assert_parents_alive(svc, dict(blocks))
    await assert_clean(svc)


async def test_lru_order_across_chains(make_service: Any) -> None:
    """The least recently used leaf goes first, one at a time: a chain's parent exposed by its
    last child outranks the younger chains' leaves (not one leaf of every chain per round)."""
    svc = await evict_service(make_service, 100 * OBJ, num_shards=16, eviction_policy="lru")
    chains = [chain(name, 5) for name in ("lruX", "lruY", "lruZ")]
    for blocks in chains:  # X oldest, Z newest: distinct creation times
        await put_blocks(svc, blocks)
        await asyncio.sleep(0.02)
    res = await svc.evict_once(max_objects=7)
    order = [leaf for r in res.round_leaves for leaf in r]
    x, y = ([b for b, _ in reversed(c)] for c in chains[:2])
    assert order == x + y[:2], (order, x + y[:2])
    assert len(res.round_leaves) == 1 and res.cascade_depth == 5
    for b, _ in chains[2]:
        assert await stored(svc, b)
    await assert_parents_alive(svc, dict(b for c in chains for b in c))
    await assert_clean(svc)


async def test_partial_chain_stops_at_watermark(make_service: Any) -> None:
    blocks = chain("part", 100)
    # 100 objects in 125: used 0.8 > hw 0.7; stop at or below 0.6 -> 25 objects go, leaf first.
    svc = await evict_service(
        make_service, 125 * OBJ, eviction_high_watermark_ratio=0.7, eviction_ratio=0.1
    )
    await put_blocks(svc, blocks)
    res = await svc.evict_once()
    assert res.evicted_objects == 25 and res.used_after <= 0.6 + 1e-9
    assert sorted(res.evicted_keys) == sorted(b for b, _ in blocks[75:])
    await assert_parents_alive(svc, dict(blocks))
    again = await svc.evict_once()
    assert again.reason == "idle" and again.evicted_objects == 0
    await assert_clean(svc)


async def test_rfc_exit_at_the_high_watermark(make_service: Any) -> None:
    """The default target is the RFC's sole exit condition: a pass started by the watermark
    stops as soon as the used ratio is at or below it; after a failed allocation (or forced)
    it still frees eviction_ratio of the capacity."""
    blocks = chain("rfcx", 100)
    svc = await evict_service(
        make_service,
        125 * OBJ,
        eviction_high_watermark_ratio=0.7,
        eviction_ratio=0.1,
        radix_eviction_target="watermark",
    )
    await put_blocks(svc, blocks)
    res = await svc.evict_once()  # used 0.8 > 0.7: down to 87.5 objects -> 13 go, leaf first
    assert res.reason == "watermark" and res.evicted_objects == 13
    assert sorted(res.evicted_keys) == sorted(b for b, _ in blocks[87:])
    assert res.used_after <= 0.7 + 1e-9
    forced = await svc.evict_once(force=True)  # down to 0.6 and at least 0.1 of 125 objects
    assert forced.evicted_objects == 13 and forced.used_after <= 0.6 + 1e-9
    await assert_parents_alive(svc, dict(blocks))
    await assert_clean(svc)


async def test_wide_tree_mixed_leases(make_service: Any) -> None:
    root = h("wroot")
    mids = [h(f"wmid{i}") for i in range(8)]
    leaves = [h(f"wleaf{i}:{j}") for i in range(8) for j in range(6)]
    tree = {root: ""} | dict.fromkeys(mids, root)
    tree |= {leaf: mids[n // 6] for n, leaf in enumerate(leaves)}
    svc = await evict_service(make_service, 100 * OBJ, eviction_ratio=0.5)
    await put_blocks(svc, list(tree.items()))
    leased = [leaves[0], leaves[7], leaves[14], leaves[21]]  # one under each of mids 0-3
    assert all(await svc.batch_exist_key(leased))
    res = await svc.evict_once()
    # every unleased leaf goes, then each mid whose leaves all went; root stays (mids leased
    # below it), the leased leaves and their mids stay
    alive_mids = {tree[x] for x in leased}
    expect = (set(leaves) - set(leased)) | (set(mids) - alive_mids)
    assert set(res.evicted_keys) == expect
    assert res.cascade_depth == 2
    for x in [root, *leased, *alive_mids]:
        assert await stored(svc, x)
    await assert_parents_alive(svc, tree)
    await assert_clean(svc)


async def test_pins(make_service: Any) -> None:
    svc = await evict_service(make_service, 20 * OBJ, eviction_ratio=0.5)
    soft = chain("soft", 3)
    hard = chain("hard", 3)
    plain = chain("plain", 3)
    await put_blocks(svc, soft, with_soft_pin=True)
    await put_blocks(svc, hard[:2])
    await put_blocks(svc, hard[2:], with_hard_pin=True)
    await put_blocks(svc, plain)
    # 9 of 20 used (0.45 < hw 0.5): force = as after a failed allocation, goal 0 bytes
    res = await svc.evict_once(force=True)
    keys = set(res.evicted_keys)
    assert {b for b, _ in plain} <= keys  # plain first
    assert not keys & {b for b, _ in hard}  # hard leaf never; its parents are protected
    assert {b for b, _ in soft} <= keys and res.soft_pinned_objects == 3  # last resort
    assert res.evicted_keys.index(soft[-1][0]) > max(res.evicted_keys.index(b) for b, _ in plain)
    assert res.skipped["hard"] >= 1
    await assert_parents_alive(svc, dict(soft + hard + plain))
    await assert_clean(svc)


async def test_soft_pins_kept_when_not_allowed(make_service: Any) -> None:
    svc = await evict_service(
        make_service, 20 * OBJ, eviction_ratio=0.5, allow_evict_soft_pinned_objects=False
    )
    soft = chain("nsoft", 3)
    await put_blocks(svc, soft, with_soft_pin=True)
    res = await svc.evict_once(force=True)
    assert res.evicted_objects == 0
    for b, _ in soft:
        assert await stored(svc, b)


async def test_multi_key_blocks_and_registered_not_stored(make_service: Any) -> None:
    svc = await evict_service(make_service, 40 * OBJ, eviction_ratio=0.5)
    blocks = chain("mha", 4)
    await put_blocks(svc, blocks, keys_per_block=4)
    leaf = blocks[-1][0]
    # a key registered under the leaf but never stored does not block it
    extra = f"{leaf}_9_v"
    await svc.register_radix_tree_node(leaf, blocks[-2][0], [extra])
    # one key of the second block leased: that block and its ancestors stay, whole
    assert await svc.exist_key(block_keys(blocks[1][0], 4)[2])
    res = await svc.evict_once(force=True)
    assert res.evicted_leaves == 2 and res.evicted_objects == 8 and res.unregistered_keys == 1
    assert set(res.evicted_keys) == set(block_keys(blocks[3][0], 4) + block_keys(blocks[2][0], 4))
    await assert_parents_alive(svc, dict(blocks), keys_per_block=4)
    await assert_clean(svc)


async def test_no_tree_objects_fallback(make_service: Any) -> None:
    # objects whose keys were unregistered from the radix index belong to no tree: BatchEvict
    # takes them after the leaves, and never a tree member (a worker without the radix index
    # is refused on a radix namespace, so this is the one way to hold such objects)
    url_svc = await evict_service(make_service, 20 * OBJ, eviction_ratio=0.5)
    await put_blocks(url_svc, chain("tree", 4))
    loose = [h(f"loose{i}") for i in range(6)]
    await put_blocks(url_svc, [(k, "") for k in loose])
    keys = url_svc.keys
    lru = [keys.shard_key(sh, "lru") for sh in range(keys.num_shards)]

    async def in_lru() -> set[str]:
        c = url_svc.backend.client
        return {m.decode() for k in lru for m in await c.zrange(k, 0, -1)}

    # the lean layout: the lru index holds objects of no tree only (leaves order the others),
    # and a key unregistered from the tree brings its object in
    assert await in_lru() == set()
    assert await url_svc.unregister_radix_tree_keys(loose) == 6
    assert await in_lru() == set(loose)
    res = await url_svc.evict_once(force=True)
    assert res.fallback_objects == 6 and set(loose) <= set(res.evicted_keys)
    assert res.evicted_objects == 10
    await assert_clean(url_svc)


async def _hot_and_cold(svc: MasterService, tag: str) -> tuple[str, str]:
    hot, cold = h(f"hot{tag}"), h(f"cold{tag}")
    await put_blocks(svc, [(hot, "")])
    for _ in range(8):
        assert await svc.exist_key(hot)
    await asyncio.sleep(0.06)  # hot's lease is over, and older than cold's creation
    await put_blocks(svc, [(cold, "")])
    # A put leaves its object leased until its own ms: a pass in that same ms reads cold as
    # not evictable yet and ends its index walk there (the flake: hot went instead).
    await asyncio.sleep(0.005)
    return hot, cold


async def test_lru_freq_keeps_hot_leaf_longer(make_service: Any) -> None:
    svc = await evict_service(
        make_service,
        20 * OBJ,
        eviction_policy="lru-freq:60000",
        default_kv_lease_ttl_ms=50,
    )
    hot, cold = await _hot_and_cold(svc, "f")
    res = await svc.evict_once(max_objects=1)
    assert res.evicted_keys == [cold] and res.policy == "lru-freq:60000"
    # the frequency-favoured leaf is still reachable once the others are gone
    res = await svc.evict_once(max_objects=1)
    assert res.evicted_keys == [hot]


async def test_lru_is_lease_order(make_service: Any) -> None:
    svc = await evict_service(
        make_service, 20 * OBJ, default_kv_lease_ttl_ms=50, eviction_policy="lru"
    )
    hot, _cold = await _hot_and_cold(svc, "l")
    res = await svc.evict_once(max_objects=1)
    assert res.evicted_keys == [hot] and res.policy == "lru"


async def test_parent_gaining_child_survives(make_service: Any) -> None:
    """Children registered between the candidate read and the evict step: the evict script
    re-checks, the parents survive, and their new children are evicted first next time."""
    svc = await evict_service(make_service, 100 * OBJ, eviction_ratio=0.5)
    parents = [h(f"gp{i}") for i in range(6)]
    await put_blocks(svc, [(p, "") for p in parents])
    children = [(h(f"gc{i}"), p) for i, p in enumerate(parents[:3])]
    fired = []

    async def hook(step: str) -> None:
        if step == "evict:chosen" and not fired:
            fired.append(step)
            await put_blocks(svc, children)

    svc.fault_hook = hook
    res = await svc.evict_once(force=True)
    assert fired and res.skipped["inner"] == 3
    assert set(res.evicted_keys) == set(parents[3:]) | {c for c, _ in children} | set(
        parents[:3]
    ) or set(res.evicted_keys) == set(parents[3:])
    for c, p in children:
        if await stored(svc, c):
            assert await stored(svc, p)
    tree = {p: "" for p in parents} | dict(children)
    await assert_parents_alive(svc, tree)
    await assert_clean(svc)


async def test_eviction_concurrent_with_registration(make_service: Any) -> None:
    svc = await evict_service(make_service, 400 * OBJ, eviction_ratio=0.5)
    roots = chain("cr", 30)
    await put_blocks(svc, roots)
    kids = [(h(f"crk{i}"), roots[i % 30][0]) for i in range(60)]

    async def register() -> None:
        for start in range(0, len(kids), 4):
            await put_blocks(svc, kids[start : start + 4], strict=False)
            await asyncio.sleep(0)

    results = await asyncio.gather(
        svc.evict_once(force=True), register(), svc.evict_once(force=True)
    )
    assert sum(r.evicted_objects for r in results[::2]) >= 1
    await assert_clean(svc)
    # no partial blocks, and what is alive now has its stored ancestors (a parent evicted
    # before a child was linked leaves a shell, which is not an eviction of a live parent)
    tree = dict(roots) | dict(kids)
    for blk, parent in tree.items():
        if await stored(svc, blk) and parent and await stored(svc, parent):
            p = tree[parent]
            while p:
                assert await stored(svc, p)
                p = tree[p]
