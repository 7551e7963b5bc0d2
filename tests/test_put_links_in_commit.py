"""A put whose parent block is an earlier put of the same batch and shard is linked by its own
commit (put_start, ``FOLD_LINK``), parent first, in the same atomic script call: a chain put in
one batch makes no shell parents in a step before the commit and needs no cycle check, and
every edge, child count, leaf entry and tiered mark is what the separate link step would have
written. So is a put whose parent is no block of the batch, in the same shard (``FOLD_STORED``:
its commit applies the put guard to the parent). The other puts (parent in another shard, or
later in the batch) keep the link step. On fakeredis, Redis and Redis Cluster, with 1 shard
(every pair folds) and 8 (some do)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_redis import ErrorCode, MooncakeError
from mooncake_redis.keys import node_child_field
from mooncake_redis.models import ReplicateConfig
from mooncake_redis.records import _s
from mooncake_redis.testing.probes import wipe
from tests.eviction_helpers import (
    CLIENT,
    assert_clean,
    assert_parents_alive,
    chain,
    evict_service,
    put_blocks,
    seg,
)
from tests.helpers import h, record_calls


async def node_fields(svc: Any, block: str) -> dict[str, str]:
    raw = await svc.backend.client.hgetall(svc.keys.node(svc.keys.shard_of(block), block))
    fields = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw.items()}
    return {k: v for k, v in fields.items() if not k.startswith((">", "<"))}


async def edge(svc: Any, parent: str, child: str) -> str | None:
    raw = await svc.backend.client.hget(
        svc.keys.node(svc.keys.shard_of(parent), parent), node_child_field(child)
    )
    return _s(raw) if raw is not None else None


async def leaves(svc: Any) -> set[str]:
    out: set[str] = set()
    for shard in range(svc.keys.num_shards):
        key = svc.keys.shard_key(shard, "leaves")
        out.update(_s(m) for m in await svc.backend.client.zrange(key, 0, -1))
    return out


@pytest.mark.parametrize("shards", [1, 8])
@pytest.mark.parametrize("keys_per_block", [1, 4])
async def test_a_chain_put_in_one_batch_is_linked_by_its_commit(
    make_service: Any, shards: int, keys_per_block: int
) -> None:
    svc = await evict_service(make_service, 1 << 26, num_shards=shards, default_kv_lease_ttl_ms=0)
    root = chain("fold-root", 1)
    assert await put_blocks(svc, root, keys_per_block=keys_per_block) == keys_per_block
    blocks = [(h(f"fold{i}"), h(f"fold{i - 1}") if i else root[0][0]) for i in range(12)]
    calls = record_calls(svc)
    assert await put_blocks(svc, blocks, keys_per_block=keys_per_block) == 12 * keys_per_block
    # Folded: a block whose parent is an earlier block of the batch or a stored one, in the
    # same shard, and that gets no child from the link step: from the tip of the chain down to
    # its last shard crossing. Only the others went through the link step.
    shard_of = svc.keys.shard_of
    expect_linked = set()
    crossed = False
    for i in range(len(blocks) - 1, -1, -1):
        blk, parent = blocks[i]
        crossed = crossed or shard_of(parent) != shard_of(blk)
        if crossed:
            expect_linked.add((parent, blk))
    linked = set()
    for c in calls:
        if c.name == "radix_link":
            args = [a.decode("latin-1") if isinstance(a, bytes) else str(a) for a in c.args]
            j = 1
            while j < len(args):  # groups: anchor, shard, n, then n (parent, child, field)
                n = int(args[j + 2])
                for k in range(n):
                    linked.add((args[j + 3 + 3 * k], args[j + 4 + 3 * k]))
                j += 3 + 3 * n
    assert linked == expect_linked
    if shards == 1:  # no link step at all, no shell, no cycle check
        assert not expect_linked
        assert not [c for c in calls if c.name in ("radix_link", "radix_chain")]
    # Each parent names its child with the generation the child recorded, counts it, is out
    # of the leaf index and (tiered, the default policy) exposed; the tip is the only leaf.
    for blk, parent in blocks:
        assert await edge(svc, parent, blk) is not None
        node = await node_fields(svc, parent)
        assert node["d"] == "1" and node.get("x") == "1", node
    tip = blocks[-1][0]
    assert await edge(svc, tip, h("none")) is None
    assert "d" not in await node_fields(svc, tip)
    assert await leaves(svc) == {tip}
    await assert_clean(svc)  # edges against recorded generations, counts, leaf index
    # Leaf first from the tip, as with links made by the link step.
    result = await svc.evict_once(max_objects=3 * keys_per_block)
    assert result.evicted_objects == 3 * keys_per_block
    alive = await svc.batch_exist_key([b for b, _ in blocks] if keys_per_block == 1 else [])
    if keys_per_block == 1:
        assert alive == [True] * 9 + [False] * 3
    parents = {root[0][0]: "", **dict(blocks)}
    await assert_parents_alive(svc, parents, keys_per_block)
    await assert_clean(svc)


async def test_a_folded_child_of_a_stored_parent_that_is_put_again(make_service: Any) -> None:
    """The parent's put fails (it exists, complete): its child still links, to the stored
    parent, in its commit, and is stored under it."""
    svc = await evict_service(make_service, 1 << 24, num_shards=1)
    a, b = h("fold-a"), h("fold-b")
    assert await put_blocks(svc, [(a, "")]) == 1
    res = await svc.batch_put_start(
        CLIENT, [a, b], [4096, 4096], [ReplicateConfig(), ReplicateConfig(parent_block_hash=a)]
    )
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.OBJECT_ALREADY_EXISTS
    assert isinstance(res[1], list)
    assert await svc.batch_put_end(CLIENT, [b]) == [None]
    assert await edge(svc, a, b) is not None
    assert await leaves(svc) == {b}
    await assert_clean(svc)


async def test_a_folded_child_of_a_parent_that_got_no_buffer_is_rolled_back(
    make_service: Any,
) -> None:
    """The parent's put fails for want of room: the child's commit links it to a shell (as the
    link step would have), and the batch's roll back then revokes the child, so nothing of
    either stays."""
    svc = await evict_service(make_service, 1 << 20, num_shards=1)
    a, b = h("fold-big"), h("fold-small")
    res = await svc.batch_put_start(
        CLIENT,
        [a, b],
        [1 << 21, 4096],
        [ReplicateConfig(), ReplicateConfig(parent_block_hash=a)],
    )
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.INVALID_PARAMS
    assert isinstance(res[1], MooncakeError) and "rolled back" in res[1].message
    assert await svc.batch_exist_key([a, b]) == [False, False]
    assert await node_fields(svc, a) == {} and await node_fields(svc, b) == {}
    await assert_clean(svc)


@pytest.mark.parametrize("shards", [1, 8])
async def test_a_cycle_inside_one_batch_is_still_refused(make_service: Any, shards: int) -> None:
    """b's parent is a, an earlier put (folded where the shards match); a's parent is b, a later
    one (the link step, which makes b a shell with a child): the cycle check refuses one of
    them and the batch keeps no cycle, whatever is folded."""
    svc = await evict_service(make_service, 1 << 24, num_shards=shards)
    a, b = h("cyc-a"), h("cyc-b")
    res = await svc.batch_put_start(
        CLIENT,
        [a, b],
        [4096, 4096],
        [ReplicateConfig(parent_block_hash=b), ReplicateConfig(parent_block_hash=a)],
    )
    errors = [r for r in res if isinstance(r, MooncakeError)]
    assert errors and any("cycle" in e.message for e in errors), res
    ok = [k for k, r in zip([a, b], res) if isinstance(r, list)]
    assert await svc.batch_put_end(CLIENT, ok) == [None] * len(ok)
    await assert_clean(svc)


FUZZ = settings(
    max_examples=int(os.environ.get("MCR_FUZZ_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("shards", [1, 8])
@FUZZ
@given(
    parents=st.lists(st.integers(-2, 7), min_size=8, max_size=8),
    order=st.permutations(list(range(8))),
)
async def test_any_batch_of_parents_keeps_an_acyclic_tree(
    make_service: Any, shards: int, parents: list[int], order: list[int]
) -> None:
    """Eight new blocks in one batch, in any order, each under another of them (earlier or
    later: folded or not), under a stored block, or none; some pairs form cycles. Whatever is
    accepted is a clean tree (fsck: no cycle, edges and counts right) where every stored block's
    parent is stored, and every accepted put is stored."""
    svc = await make_service(enable_radix_tree=True, num_shards=shards, default_kv_lease_ttl_ms=0)
    await wipe(svc)  # the namespace of earlier examples
    await svc.mount_segment(seg(0, 1 << 24), CLIENT)
    s0, s1 = h("fz-s0"), h("fz-s1")
    assert await put_blocks(svc, [(s0, ""), (s1, s0)]) == 2
    blocks = [h(f"fz{i}") for i in range(8)]

    def parent_of(i: int) -> str:
        p = parents[i]
        return "" if p == -2 or p == i else s1 if p == -1 else blocks[p]

    keys = [blocks[i] for i in order]
    res = await svc.batch_put_start(
        CLIENT,
        keys,
        [4096] * 8,
        [ReplicateConfig(parent_block_hash=parent_of(i)) for i in order],
    )
    for r in res:
        assert isinstance(r, list) or r.code in (
            ErrorCode.INVALID_PARAMS,
            ErrorCode.NO_AVAILABLE_HANDLE,
        ), r
    ok = [k for k, r in zip(keys, res) if isinstance(r, list)]
    assert await svc.batch_put_end(CLIENT, ok) == [None] * len(ok)
    alive = dict(zip(blocks, await svc.batch_exist_key(blocks)))
    assert {b for b in blocks if alive[b]} == set(ok)
    for i, b in enumerate(blocks):
        p = parent_of(i)
        if alive[b] and p in alive:
            assert alive[p], (i, parents)
    await assert_clean(svc)


async def test_a_folded_child_of_a_stored_block_is_kept_when_a_sibling_fails(
    make_service: Any,
) -> None:
    """Block p (two keys) is stored; the batch puts p_0_k again (it exists), a new p_3_k, a
    p_2_k that gets no buffer, and a child c of p. p's block is in the roll back's bad set (so
    p_3_k is revoked), but it was stored before the batch: c stays, as with the link step (the
    link's stored flag is the block's state before the commit, without the p_3_k it wrote)."""
    svc = await evict_service(make_service, 1 << 20, num_shards=1)
    p, c = h("ps-p"), h("ps-c")
    assert await put_blocks(svc, [(p, "")], keys_per_block=2) == 2
    keys = [f"{p}_0_k", f"{p}_3_k", f"{p}_2_k", c]
    res = await svc.batch_put_start(
        CLIENT,
        keys,
        [4096, 4096, 1 << 21, 4096],
        [ReplicateConfig()] * 3 + [ReplicateConfig(parent_block_hash=p)],
    )
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.OBJECT_ALREADY_EXISTS
    assert isinstance(res[1], MooncakeError) and "rolled back" in res[1].message
    assert isinstance(res[2], MooncakeError) and res[2].code == ErrorCode.INVALID_PARAMS
    assert isinstance(res[3], list), res[3]
    assert await svc.batch_put_end(CLIENT, [c]) == [None]
    assert await svc.batch_exist_key([f"{p}_0_k", f"{p}_1_k", c]) == [True] * 3
    await assert_clean(svc)


async def test_a_shard_split_over_calls_folds_nothing(make_service: Any) -> None:
    """With more puts in a shard than one script call takes (script_batch_size), a child could
    be committed in a later call than its parent's refused re-put, and an eviction between the
    two could take the parent: such a chunk keeps the link step, whose edge protects it."""
    svc = await evict_service(
        make_service, 1 << 24, num_shards=1, script_batch_size=1, default_kv_lease_ttl_ms=0
    )
    p, c = h("split-p"), h("split-c")
    assert await put_blocks(svc, [(p, "")]) == 1
    calls = record_calls(svc)
    real = svc.backend.call
    evicted: list[int] = []

    async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
        reply = await real(name, keys, args, node)
        if name == "put_start" and not evicted:
            evicted.append((await svc.evict_once(max_objects=1)).evicted_objects)
        return reply

    svc.backend.call = call  # type: ignore[method-assign]
    res = await svc.batch_put_start(
        CLIENT, [p, c], [4096, 4096], [ReplicateConfig(), ReplicateConfig(parent_block_hash=p)]
    )
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.OBJECT_ALREADY_EXISTS
    assert isinstance(res[1], list)
    assert [x.name for x in calls].count("radix_link") == 1  # not folded
    assert evicted == [0]  # p has a child from the link step: not a leaf
    assert await svc.batch_put_end(CLIENT, [c]) == [None]
    assert await svc.batch_exist_key([p, c]) == [True, True]
    await assert_clean(svc)


@pytest.mark.parametrize("cycle", [False, True])
async def test_a_folded_put_that_must_be_checked_is_linked_first(
    make_service: Any, cycle: bool
) -> None:
    """p is a stored leaf (the oldest); r exists as a root with a child x. The batch puts p
    again (it exists) and then r under p (folded). r's commit answers "check first": it is
    linked all the same, so an eviction pass before the resend cannot take p (the link step's
    edge would have protected it too), then sent again with that generation; or, when p is
    below r, refused and its edge undone."""
    svc = await evict_service(make_service, 1 << 24, num_shards=1, default_kv_lease_ttl_ms=0)
    r, x, p = h("chk-r"), h("chk-x"), h("chk-p")
    if cycle:  # p under x under r: r under p would close a cycle
        assert await put_blocks(svc, [(r, ""), (x, r), (p, x)]) == 3
    else:
        assert await put_blocks(svc, [(p, "")]) == 1
        assert await put_blocks(svc, [(r, ""), (x, r)]) == 2
    calls = record_calls(svc)
    real = svc.backend.call
    evicted: list[int] = []

    async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
        reply = await real(name, keys, args, node)
        if name == "put_start" and not evicted:  # between the commit and its resend
            evicted.append((await svc.evict_once(max_objects=1)).evicted_objects)
        return reply

    svc.backend.call = call  # type: ignore[method-assign]
    res = await svc.batch_put_start(
        CLIENT,
        [p, r + "_1_k"],
        [4096, 4096],
        [
            ReplicateConfig(parent_block_hash=x if cycle else ""),
            ReplicateConfig(parent_block_hash=p),
        ],
    )
    svc.backend.call = real  # type: ignore[method-assign]
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.OBJECT_ALREADY_EXISTS
    # r's link is made by its commit (and p's, to its stored parent x, in the cycle case: p
    # exists, so it is not made)
    assert [c.name for c in calls].count("radix_link") == 0
    # the commit, then (no cycle) the resend
    assert [c.name for c in calls].count("put_start") == (1 if cycle else 2)
    # p is no leaf once r is linked: the pass takes x (or, in the cycle, finds no leaf at all)
    assert evicted == [0 if cycle else 1]
    if cycle:
        assert isinstance(res[1], MooncakeError) and "cycle" in res[1].message
        assert await edge(svc, p, r) is None
    else:
        assert isinstance(res[1], list), res[1]
        assert await svc.batch_exist_key([p]) == [True]  # x went, not p
        assert (await svc.get_keys_by_prefix(r)).parent_prefix_hash == p
        assert await edge(svc, p, r) is not None
        assert await svc.batch_put_end(CLIENT, [r + "_1_k"]) == [None]
    await assert_clean(svc)


@pytest.mark.parametrize("how", ["exists", "no buffer"])
async def test_a_failed_key_leaves_the_edge_its_stored_sibling_uses(
    make_service: Any, how: str
) -> None:
    """Two keys of block b1 under one parent b2 share one edge, of the last link's generation.
    k1 must be cycle-checked first (b1 is a root with a child) and is sent again; k0 fails
    (it exists, or gets no buffer: then b1 is not accepted whole and k1 is rolled back). k0's
    edge is adopted by b1 (its generation raised to the edge's), not dropped from under k1: b2
    still lists b1, whose generation matches (fsck)."""
    svc = await evict_service(make_service, 1 << 24, num_shards=1)
    b1, b0, b2 = h("se-b1"), h("se-b0"), h("se-b2")
    k0, k1 = f"{b1}_0_k", f"{b1}_1_k"
    stored = [k0] if how == "exists" else [f"{b1}_5_k"]  # b1: a stored root
    res = await svc.batch_put_start(CLIENT, stored, [4096], [ReplicateConfig()])
    assert await svc.batch_put_end(CLIENT, stored) == [None]
    assert await put_blocks(svc, [(b0, b1), (b2, "")]) == 2
    res = await svc.batch_put_start(
        CLIENT,
        [k1, k0],
        [4096, 4096 if how == "exists" else 1 << 30],
        [ReplicateConfig(parent_block_hash=b2), ReplicateConfig(parent_block_hash=b2)],
    )
    assert isinstance(res[1], MooncakeError)
    if how == "exists":
        assert isinstance(res[0], list), res[0]
        assert await svc.batch_put_end(CLIENT, [k1]) == [None]
    else:  # b1 was not accepted whole: k1 is rolled back, the edge goes with it or stays right
        assert isinstance(res[0], MooncakeError) and "rolled back" in res[0].message
    assert await edge(svc, b2, b1) is not None
    assert (await svc.get_keys_by_prefix(b1)).parent_prefix_hash == b2
    await assert_clean(svc)


@pytest.mark.parametrize("order", ["existing first", "new first"])
async def test_a_key_that_exists_does_not_take_its_blocks_parent_from_a_new_key(
    make_service: Any, order: str
) -> None:
    """Root block c has one stored key; the batch puts d under c (so c's keys are checked
    before the commit), the stored key again under p1 and a new key under p2. The stored key
    answers OBJECT_ALREADY_EXISTS and the new key is stored under p2, in either order: the
    cycle check sends a second parent unchecked instead of refusing it (its commit checks it
    against what was written)."""
    svc = await evict_service(make_service, 1 << 26, num_shards=1, default_kv_lease_ttl_ms=0)
    c, p1, p2, d = h("gv-c"), h("gv-p1"), h("gv-p2"), h("gv-d")
    assert await put_blocks(svc, [(p1, ""), (p2, "")]) == 2
    k0, k1 = f"{c}_0_k", f"{c}_1_k"
    assert isinstance(
        (await svc.batch_put_start(CLIENT, [k0], [4096], [ReplicateConfig()]))[0], list
    )
    assert await svc.batch_put_end(CLIENT, [k0]) == [None]
    pairs = (
        [(d, c), (k0, p1), (k1, p2)] if order == "existing first" else [(d, c), (k1, p2), (k0, p1)]
    )
    res = await svc.batch_put_start(
        CLIENT,
        [k for k, _ in pairs],
        [4096] * 3,
        [ReplicateConfig(parent_block_hash=p) for _, p in pairs],
    )
    got = {k: (0 if isinstance(r, list) else int(r.code)) for (k, _), r in zip(pairs, res)}
    assert got == {d: 0, k0: int(ErrorCode.OBJECT_ALREADY_EXISTS), k1: 0}, res
    assert await svc.batch_put_end(CLIENT, [d, k1]) == [None, None]
    assert (await svc.get_keys_by_prefix(c)).parent_prefix_hash == p2
    await assert_clean(svc)


@pytest.mark.parametrize("lose", [False, True])
async def test_a_lost_commit_reply_keeps_the_parents_stored_flag(
    make_service: Any, lose: bool
) -> None:
    """put_start is sent again when its reply is lost (idempotent: the keys it wrote answer
    'again'). A folded child's 'again' still reports that its parent block was stored before
    the batch, so the roll back of the block's failed new key keeps the child."""
    svc = await evict_service(make_service, 1 << 26, num_shards=1, default_kv_lease_ttl_ms=0)
    p, c = h("ag-p"), h("ag-c")
    p0, p1, p2 = f"{p}_0_k", f"{p}_1_k", f"{p}_2_k"
    await svc.batch_put_start(CLIENT, [p0, p1], [1000, 1000], [ReplicateConfig()] * 2)
    assert await svc.batch_put_end(CLIENT, [p0, p1]) == [None, None]
    real = svc.backend.call
    lost: list[Any] = []

    async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
        if lose and name == "put_start" and not lost:
            lost.append(await real(name, keys, args, node))  # it ran; its reply is lost
        return await real(name, keys, args, node)

    svc.backend.call = call  # type: ignore[method-assign]
    res = await svc.batch_put_start(
        CLIENT, [p2, c], [1 << 30, 1000], [ReplicateConfig(), ReplicateConfig(parent_block_hash=p)]
    )
    svc.backend.call = real  # type: ignore[method-assign]
    assert isinstance(res[0], MooncakeError) and isinstance(res[1], list), res
    assert len(lost) == int(lose)
    assert await svc.batch_put_end(CLIENT, [c]) == [None]
    await assert_clean(svc)


async def test_a_nodes_link_generation_never_falls_below_its_edge(make_service: Any) -> None:
    """A key that gets no buffer adopts its bumped edge before the commit (the node's link
    generation rises to it); a sibling stored in the commit with the older generation must not
    lower it, or removing the block later leaves the edge behind (fsck: dangling_edge)."""
    svc = await evict_service(make_service, 1 << 26, num_shards=1, default_kv_lease_ttl_ms=0)
    p, c = h("gg-p"), h("gg-c")
    ks = [f"{c}_{i}_k" for i in range(3)]
    await svc.batch_put_start(CLIENT, [p], [1000], [ReplicateConfig()])
    assert await svc.batch_put_end(CLIENT, [p]) == [None]
    await svc.batch_put_start(CLIENT, ks[:1], [1000], [ReplicateConfig(parent_block_hash=p)])
    assert await svc.batch_put_end(CLIENT, ks[:1]) == [None]
    res = await svc.batch_put_start(
        CLIENT, ks[1:], [1000, 1 << 30], [ReplicateConfig(parent_block_hash=p)] * 2
    )
    assert isinstance(res[1], MooncakeError)  # and so ks[1] is rolled back (c not whole)
    ok = [k for k, r in zip(ks[1:], res) if isinstance(r, list)]
    assert await svc.batch_put_end(CLIENT, ok) == [None] * len(ok)
    await assert_clean(svc)
    await svc.batch_remove([ks[0], *ok], force=True)
    assert await svc.batch_exist_key(ks) == [False] * 3
    await assert_clean(svc)
    assert await edge(svc, p, c) is None
