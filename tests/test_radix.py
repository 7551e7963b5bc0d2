"""The radix index on every backend: RFC example, shells, cross-shard edges, cascades, subtree
queries, concurrency, script cache flushes, bad input, and fsck repair of an interrupted link."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from typing import Any

import pytest

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.bench.common import drop_namespace
from mooncake_redis.fsck import fsck
from tests.helpers import h, hashes_in_shard, mha_keys


async def node_or_none(svc: MasterService, prefix: str) -> Any:
    try:
        return await svc.get_keys_by_prefix(prefix)
    except MooncakeError as exc:
        assert exc.code == ErrorCode.OBJECT_NOT_FOUND
        return None


async def assert_clean(svc: MasterService) -> None:
    report = await fsck(svc)
    assert report.clean, report.to_dict()


async def test_rfc_example_tree(service: MasterService) -> None:
    A, B, C, D, E, F = (h(x) for x in "ABCDEF")
    await service.batch_register_radix_tree_node(
        [(A, "", [A]), (B, A, [B]), (C, A, [C]), (D, B, [D]), (E, B, [E]), (F, C, [F])]
    )
    a = await service.get_keys_by_prefix(A)
    assert sorted(a.children) == sorted([B, C])
    assert a.keys == [A] and not a.is_leaf and not a.is_shell and a.parent_prefix_hash == ""
    d = await service.get_keys_by_prefix(D)
    assert d.is_leaf and d.parent_prefix_hash == B
    sub = await service.get_subtree_keys(A, 2)
    assert set(sub.nodes) == {A, B, C, D, E, F} and sorted(sub.keys) == sorted([A, B, C, D, E, F])
    assert not sub.truncated and sub.depth_reached == 2
    await assert_clean(service)


async def test_mha_keys_and_prefix_extraction(service: MasterService) -> None:
    blk = h("mha")
    keys = mha_keys(blk, tp=4)
    await service.register_radix_tree_node(blk, "", keys)
    node = await service.get_keys_by_prefix(blk)
    assert node.keys == sorted(keys)
    with pytest.raises(MooncakeError) as exc:
        await service.register_radix_tree_node(blk, "", [h("other") + "_0_k"])
    assert exc.value.code == ErrorCode.INVALID_PARAMS and "keys[0]" in exc.value.message


@pytest.mark.parametrize("child_first", [True, False])
async def test_both_registration_orders(service: MasterService, child_first: bool) -> None:
    P, C = h("parent"), h("child")
    if child_first:
        await service.register_radix_tree_node(C, P, [C])
        shell = await service.get_keys_by_prefix(P)
        assert shell.is_shell and shell.children == [C] and not shell.is_leaf
        await service.register_radix_tree_node(P, "", [P])
    else:
        await service.register_radix_tree_node(P, "", [P])
        await service.register_radix_tree_node(C, P, [C])
    p = await service.get_keys_by_prefix(P)
    assert p.keys == [P] and p.children == [C] and not p.is_shell
    assert (await service.get_keys_by_prefix(C)).parent_prefix_hash == P
    await assert_clean(service)


async def test_cross_shard_parent_and_child(service: MasterService) -> None:
    P = next(hashes_in_shard(service, 1))
    C = next(hashes_in_shard(service, 2))
    assert service.keys.shard_of(P) != service.keys.shard_of(C)
    await service.register_radix_tree_node(C, P, [C])
    await service.register_radix_tree_node(P, "", [P])
    assert (await service.get_keys_by_prefix(P)).children == [C]
    await service.unregister_radix_tree_keys([C])
    assert await node_or_none(service, C) is None
    p = await service.get_keys_by_prefix(P)
    assert p.children == [] and p.is_leaf
    await assert_clean(service)


async def test_cascade_through_empty_shells_across_shards(service: MasterService) -> None:
    # Chain root -> s1 -> s2 -> s3 -> leaf, shells in different shards; root keeps its keys.
    chain = [next(hashes_in_shard(service, i % service.keys.num_shards, "c")) for i in range(5)]
    root, leaf = chain[0], chain[-1]
    await service.register_radix_tree_node(root, "", [root])
    await service.batch_register_radix_tree_node(
        [(chain[i], chain[i - 1], [chain[i]]) for i in range(1, 5)]
    )
    # Remove the middle nodes' keys first: they stay as shells because each has a child.
    await service.unregister_radix_tree_keys(chain[1:4])
    for mid in chain[1:4]:
        assert (await service.get_keys_by_prefix(mid)).is_shell
    removed = await service.unregister_radix_tree_keys([leaf])
    assert removed == 1
    for gone in chain[1:]:
        assert await node_or_none(service, gone) is None
    r = await service.get_keys_by_prefix(root)
    assert r.children == [] and r.is_leaf and r.keys == [root]
    await assert_clean(service)


async def test_long_chain_cascade(service: MasterService) -> None:
    chain = [h(f"deep{i}") for i in range(120)]
    await service.batch_register_radix_tree_node(
        [(chain[i], chain[i - 1] if i else "", [chain[i]]) for i in range(len(chain))]
    )
    await service.unregister_radix_tree_keys(chain[:-1])  # all shells now, but the leaf
    assert (await service.get_keys_by_prefix(chain[0])).is_shell
    await service.unregister_radix_tree_keys([chain[-1]])
    for x in chain[::17]:
        assert await node_or_none(service, x) is None
    report = await fsck(service)
    assert report.clean and report.counts["nodes"] == 0


async def test_subtree_depth_limits(service: MasterService) -> None:
    chain = [h(f"sub{i}") for i in range(6)]
    await service.batch_register_radix_tree_node(
        [(chain[i], chain[i - 1] if i else "", [chain[i]]) for i in range(6)]
    )
    for depth in range(0, 7):
        sub = await service.get_subtree_keys(chain[0], depth)
        assert set(sub.nodes) == set(chain[: min(depth, 5) + 1])
        assert sub.truncated == (depth < 5)
    mid = await service.get_subtree_keys(chain[3], 1)
    assert set(mid.nodes) == {chain[3], chain[4]}
    with pytest.raises(MooncakeError) as exc:
        await service.get_subtree_keys(chain[0], -1)
    assert exc.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(MooncakeError) as exc:
        await service.get_subtree_keys(h("nothing"), 3)
    assert exc.value.code == ErrorCode.OBJECT_NOT_FOUND


async def test_parent_rules(service: MasterService) -> None:
    P, Q, C = h("P"), h("Q"), h("C")
    await service.register_radix_tree_node(C, P, [C])
    await service.register_radix_tree_node(C, P, [C])  # idempotent
    await service.register_radix_tree_node(C, "", [C])  # unknown parent: no change
    assert (await service.get_keys_by_prefix(C)).parent_prefix_hash == P
    with pytest.raises(MooncakeError) as exc:
        await service.register_radix_tree_node(C, Q, [C])
    assert exc.value.code == ErrorCode.INVALID_PARAMS and "parent" in exc.value.message
    # The refused registration left no edge behind: Q was a fresh shell and is gone again.
    assert await node_or_none(service, Q) is None
    assert (await service.get_keys_by_prefix(P)).children == [C]
    # An unknown parent may later become known.
    R, D = h("R"), h("D")
    await service.register_radix_tree_node(D, "", [D])
    await service.register_radix_tree_node(D, R, [D])
    assert (await service.get_keys_by_prefix(R)).children == [D]
    await assert_clean(service)


@pytest.mark.parametrize(
    ("args", "code", "field"),
    [
        (("", "", ["x"]), ErrorCode.INVALID_PARAMS, "prefix_hash"),
        ((h(1), h(1), [h(1)]), ErrorCode.INVALID_PARAMS, "own parent"),
        ((h(1), "", []), ErrorCode.INVALID_PARAMS, "keys"),
        ((h(1), "", [""]), ErrorCode.INVALID_PARAMS, "keys[0]"),
        ((h(1), "", ["x" * 5000]), ErrorCode.INVALID_KEY, "keys[0]"),
        ((123, "", [h(1)]), ErrorCode.INVALID_PARAMS, "prefix_hash"),
        ((h(1), None, [h(1)]), ErrorCode.INVALID_PARAMS, "parent_prefix_hash"),
        ((h(1), "", h(1)), ErrorCode.INVALID_PARAMS, "keys"),
        ((h(1), "", [b"bytes"]), ErrorCode.INVALID_PARAMS, "keys[0]"),
        (("\ud800" * 3, "", ["\ud800" * 3]), ErrorCode.INVALID_PARAMS, "UTF-8"),
    ],
)
async def test_bad_input_changes_nothing(
    service: MasterService, args: tuple[Any, Any, Any], code: ErrorCode, field: str
) -> None:
    await service.register_radix_tree_node(h("keep"), "", [h("keep")])
    with pytest.raises(MooncakeError) as exc:
        await service.register_radix_tree_node(*args)
    assert exc.value.code == code and field in exc.value.message
    report = await fsck(service)
    assert report.clean and report.counts["nodes"] == 1 and report.counts["registered_keys"] == 1


async def test_batch_results_are_per_item(service: MasterService) -> None:
    A, B = h("bA"), h("bB")
    res = await service.batch_register_radix_tree_node([(A, "", [A]), ("", "", [A]), (B, A, [B])])
    assert res[0] is None and res[2] is None
    assert isinstance(res[1], MooncakeError) and res[1].code == ErrorCode.INVALID_PARAMS


async def test_concurrent_registration_many_tasks(service: MasterService) -> None:
    root = h("croot")
    kids = [h(f"ckid{i}") for i in range(60)]

    async def reg(i: int) -> None:
        await service.register_radix_tree_node(kids[i], root, [kids[i]])
        if i % 3 == 0:
            await service.register_radix_tree_node(root, "", [root])

    await asyncio.gather(*(reg(i) for i in range(60)))
    r = await service.get_keys_by_prefix(root)
    assert sorted(r.children) == sorted(kids) and r.keys == [root]
    # Concurrent removal of all children and re-registration of half of them.
    await asyncio.gather(
        service.unregister_radix_tree_keys(kids),
        *(service.register_radix_tree_node(kids[i], root, [kids[i]]) for i in range(0, 60, 2)),
    )
    r = await service.get_keys_by_prefix(root)
    for kid in r.children:  # every listed child exists and names root: no dangling edges
        assert (await service.get_keys_by_prefix(kid)).parent_prefix_hash == root
    await assert_clean(service)


def _register_in_process(url: str, namespace: str, tag: str, n: int) -> None:
    async def main() -> None:
        svc = await MasterService.from_url(url, Config(namespace=namespace, num_shards=8))
        root = h("proot")
        for i in range(n):
            await svc.register_radix_tree_node(h(f"{tag}{i}"), root, [h(f"{tag}{i}")])
        await svc.aclose()

    asyncio.run(main())


async def test_concurrent_registration_two_processes(real_backend_url: str) -> None:
    backend_url = real_backend_url
    svc = await MasterService.from_url(
        backend_url, Config(namespace="p" + uuid.uuid4().hex[:12], num_shards=8)
    )
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_register_in_process, args=(backend_url, svc.config.namespace, t, 40))
        for t in ("x", "y")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    root = await svc.get_keys_by_prefix(h("proot"))
    assert root.is_shell and len(root.children) == 80
    await assert_clean(svc)
    await svc.unregister_radix_tree_keys([h(f"{t}{i}") for t in "xy" for i in range(40)])
    assert (await fsck(svc)).counts["nodes"] == 0
    await drop_namespace(svc)
    await svc.aclose()


async def test_script_cache_flush_during_use(service: MasterService) -> None:
    A = h("flush")
    await service.register_radix_tree_node(A, "", [A])
    client = service.backend.client
    if service.backend.cluster:
        await client.execute_command("SCRIPT FLUSH", target_nodes=client.ALL_NODES)
    else:
        await client.script_flush()
    await service.register_radix_tree_node(h("flush2"), A, [h("flush2")])
    assert (await service.get_keys_by_prefix(A)).children == [h("flush2")]


async def test_recorded_shard_count_is_enforced(make_service: Any) -> None:
    await make_service(num_shards=8)
    with pytest.raises(MooncakeError) as exc:
        await make_service(num_shards=16)
    assert exc.value.code == ErrorCode.INVALID_VERSION and "num_shards=8" in exc.value.message


class Crash(Exception):
    pass


async def test_fsck_repairs_dangling_edge_from_interrupted_link(service: MasterService) -> None:
    P = next(hashes_in_shard(service, 3, "fsck"))
    C = next(hashes_in_shard(service, 5, "fsck"))
    await service.register_radix_tree_node(P, "", [P])

    async def crash(step: str) -> None:
        if step == "register:linked":
            raise Crash(step)

    service.fault_hook = crash
    with pytest.raises(Crash):
        await service.register_radix_tree_node(C, P, [C])
    service.fault_hook = None
    report = await fsck(service)
    assert report.kinds() == {"dangling_edge": 1} and report.only_allowed
    # Fresh: repair must leave it alone.
    report = await fsck(service, repair=True)
    assert report.kinds() == {"dangling_edge": 1}
    assert (await service.get_keys_by_prefix(P)).children == [C]
    # Past the grace period it goes, and the parent is a leaf again.
    report = await fsck(service, repair=True, grace_ms=-1)
    assert report.clean
    p = await service.get_keys_by_prefix(P)
    assert p.children == [] and p.is_leaf
    await assert_clean(service)


async def test_fsck_finds_and_repairs_a_wrong_leaf_index(service: MasterService) -> None:
    """A leaf missing from its shard's leaf index (and a stale entry) is reported, confirmed
    by the atomic re-read (which drops only what a live store changed meanwhile), repaired."""
    P = next(hashes_in_shard(service, 2, "li"))
    C = next(hashes_in_shard(service, 4, "li"))
    await service.batch_register_radix_tree_node([(P, "", [P]), (C, P, [C])])
    client, keys = service.backend.client, service.keys
    await client.zrem(keys.shard_key(keys.shard_of(C), "leaves"), C)  # the leaf C is missing
    await client.zadd(keys.shard_key(keys.shard_of(P), "leaves"), {P: 1})  # P has a child
    report = await fsck(service)
    assert report.kinds() == {"leaf_index": 2}, report.to_dict()["problems"]
    assert not report.only_allowed
    report = await fsck(service, repair=True)
    assert all(p.repaired for p in report.problems)
    await assert_clean(service)
    # What a live store changed between fsck's two reads is not reported.
    from mooncake_redis.fsck import FsckReport
    from mooncake_redis.fsck.radix import _confirm_leaf_index

    stale = FsckReport()
    stale.add("leaf_index", C, "read as a leaf, then missing from the index")
    stale.add("leaf_index", P, "read as an inner node, then found in the index")
    await _confirm_leaf_index(service, stale)
    assert stale.problems == []


async def test_interrupted_unlink_leaves_only_dangling_edge(service: MasterService) -> None:
    P = next(hashes_in_shard(service, 1, "ul"))
    C = next(hashes_in_shard(service, 6, "ul"))
    await service.batch_register_radix_tree_node([(P, "", [P]), (C, P, [C])])

    async def crash(step: str) -> None:
        if step == "unlink:child_removed":
            raise Crash(step)

    service.fault_hook = crash
    with pytest.raises(Crash):
        await service.unregister_radix_tree_keys([C])
    service.fault_hook = None
    report = await fsck(service)
    assert report.kinds() == {"dangling_edge": 1}
    # The edge still blocks P from being a leaf (eviction cannot take it): safe.
    assert not (await service.get_keys_by_prefix(P)).is_leaf
    # A re-registration of the child meanwhile keeps its (new) edge through a late repair.
    await service.register_radix_tree_node(C, P, [C])
    report = await fsck(service, repair=True, grace_ms=-1)
    assert report.clean
    assert (await service.get_keys_by_prefix(P)).children == [C]


async def test_batch_reads_grant_each_hit(make_service: Any) -> None:
    """One batch with several keys of a node, a repeated key and a miss: every hit counts on its
    node, the node's score (and the leaf index) is the newest lease, registered objects stay out
    of the lru index (their leaf orders them), a soft pin is refreshed, and a lease only grows.
    The leaf index scored by lease: ``lru`` (``tiered`` scores it in logical time)."""
    svc: MasterService = await make_service(
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=5_000,
        default_kv_soft_pin_ttl_ms=9_000,
        eviction_policy="lru",
    )
    from mooncake_redis.models import ReplicateConfig, Segment

    await svc.mount_segment(Segment("s0", "n0", 1 << 40, 1 << 24, "10.0.0.1:1", "tcp"), "c")
    blk, inner = h("hits"), h("inner")
    keys = mha_keys(blk, tp=2)
    cfgs = [ReplicateConfig(parent_block_hash=inner) for _ in keys]
    cfgs[1] = ReplicateConfig(parent_block_hash=inner, with_hard_pin=True)
    cfgs[2] = ReplicateConfig(parent_block_hash=inner, with_soft_pin=True)
    for k, cfg in [(inner, ReplicateConfig()), *zip(keys, cfgs)]:
        await svc.put_start("c", k, [64], cfg)
        await svc.put_end("c", k)
    c, ks = svc.backend.client, svc.keys
    shard = svc.shard_of_key(blk)
    far = 2**45  # a lease granted earlier by a longer ttl: kept, and the node's score follows
    await c.hset(ks.obj(shard, keys[3]), "l", far)
    before = await svc.get_nodes([blk, inner])
    found = await svc.batch_exist_key([*keys, keys[0], blk + "_9_k", inner])
    assert found == [True] * len(keys) + [True, False, True]
    got = await svc.batch_get_replica_list(keys[:2])
    assert all(not isinstance(g, MooncakeError) and len(g.replicas) == 1 for g in got)
    node, parent = await svc.get_nodes([blk, inner])
    assert before[0] is not None and before[1] is not None and node and parent
    assert node.hits == before[0].hits + len(keys) + 1 + 2 and parent.hits == before[1].hits + 1
    assert node.score == far
    assert await c.zscore(ks.shard_key(shard, "leaves"), blk) == far
    assert await c.zscore(ks.shard_key(svc.shard_of_key(inner), "leaves"), inner) is None
    lru = ks.shard_key(shard, "lru")
    for i, k in enumerate(keys):
        lease = int(await c.hget(ks.obj(shard, k), "l"))
        assert (i == 3) == (lease == far) and lease > 0
        assert await c.zscore(lru, k) is None, k  # registered: its leaf orders it, not the lru
    assert int(await c.hget(ks.obj(shard, keys[2]), "sp")) > int(
        await c.hget(ks.obj(shard, keys[0]), "l")
    )  # refreshed to now + the soft pin ttl, past the lease
    await assert_clean(svc)
