"""Issue 14 item 5: parent cycles are refused, and ``fsck --repair`` breaks old ones.

Nodes on a cycle never become leaves, so even a forced pass to ratio 0 freed nothing, forever.
A link that would close a cycle is refused (INVALID_PARAMS) by registration (C under D, then D
under C) and by puts (A a root, B under A, then a second key of A under B: a node's parent used
to be checked only when one was already set), also inside one batch. A cycle left by an older
version (or by two racing registrations) is reported by fsck and broken by ``--repair`` (the
node with the newest link forgets its parent), after which eviction frees everything.
"""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.keys import HASH_FIELDS, node_child_field
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h, hashes_in_shard

PSHARD, NCHILD = HASH_FIELDS["node"]["parent_shard"], HASH_FIELDS["node"]["nchildren"]


async def evicts_everything(svc: MasterService, keys: list[str]) -> None:
    await svc.evict_once(force=True, target_ratio=0.0)
    assert not any(await svc.batch_exist_key(keys))
    report = await fsck(svc)
    assert report.clean and report.counts["nodes"] == 0, report.to_dict()


async def test_registration_cannot_close_a_cycle(service: MasterService) -> None:
    c, d = next(hashes_in_shard(service, 1, "C")), next(hashes_in_shard(service, 2, "D"))
    await service.register_radix_tree_node(c, d, [c])
    try:
        await service.register_radix_tree_node(d, c, [d])
        raise AssertionError("D under C was accepted: a cycle")
    except MooncakeError as exc:
        assert exc.code == ErrorCode.INVALID_PARAMS and "cycle" in exc.message, exc
    # One batch that closes a ring of three: exactly one item is refused.
    x, y, z = (next(hashes_in_shard(service, i, f"ring{i}")) for i in (3, 4, 5))
    res = await service.batch_register_radix_tree_node([(x, z, [x]), (y, x, [y]), (z, y, [z])])
    assert sum(r is not None for r in res) == 1, res
    report = await fsck(service)
    assert report.clean, report.to_dict()
    assert (await service.get_keys_by_prefix(d)).parent_prefix_hash == ""
    assert await service.unregister_radix_tree_keys([c, x, y, z]) == 3
    assert (await fsck(service)).counts["nodes"] == 0


async def test_puts_cannot_close_a_cycle(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0)
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    a = next(hashes_in_shard(svc, 1, "A"))
    b = next(hashes_in_shard(svc, 2, "B"))
    a0, a1, b0 = f"{a}_0_k", f"{a}_1_k", f"{b}_0_k"
    await svc.put_start("c", a0, [64])
    await svc.put_end("c", a0)
    await svc.put_start("c", b0, [64], ReplicateConfig(parent_block_hash=a))
    await svc.put_end("c", b0)
    try:
        await svc.put_start("c", a1, [64], ReplicateConfig(parent_block_hash=b))
        raise AssertionError("a second key of A under B was accepted: a cycle")
    except MooncakeError as exc:
        assert exc.code == ErrorCode.INVALID_PARAMS and "cycle" in exc.message, exc
    assert (await svc.get_keys_by_prefix(a)).parent_prefix_hash == ""
    # The same in one batch: a new root E with a child F, and a second key of E under F.
    e, f = next(hashes_in_shard(svc, 3, "E")), next(hashes_in_shard(svc, 4, "F"))
    await svc.put_start("c", f"{e}_0_k", [64])
    await svc.put_end("c", f"{e}_0_k")
    res = await svc.batch_put_start(
        "c",
        [f"{f}_0_k", f"{e}_1_k"],
        [[64], [64]],
        [ReplicateConfig(parent_block_hash=e), ReplicateConfig(parent_block_hash=f)],
    )
    assert isinstance(res[1], MooncakeError) and res[1].code == ErrorCode.INVALID_PARAMS
    assert not isinstance(res[0], MooncakeError)
    await svc.put_end("c", f"{f}_0_k")
    # A legitimate late parent still works: a shell (created as someone's parent) that is
    # put later under a node that is not below it.
    g, k = next(hashes_in_shard(svc, 5, "G")), next(hashes_in_shard(svc, 6, "K"))
    await svc.register_radix_tree_node(k, g, [k])  # g: a shell with a child, no parent
    await svc.put_start("c", f"{g}_0_k", [64], ReplicateConfig(parent_block_hash=a))
    await svc.put_end("c", f"{g}_0_k")
    assert (await svc.get_keys_by_prefix(g)).parent_prefix_hash == a
    await svc.unregister_radix_tree_keys([k])
    report = await fsck(svc)
    assert report.clean, report.to_dict()
    await evicts_everything(svc, [a0, b0, f"{e}_0_k", f"{f}_0_k", f"{g}_0_k"])


@pytest.mark.parametrize("shards", [1, 8])
async def test_two_parents_for_one_block_in_one_batch_cannot_close_a_cycle(
    make_service: Any, shards: int
) -> None:
    """b (one key stored, no parent) gets two keys in one batch naming two parents, x and c, and
    c is put under b in the same batch. The batch's check accepted b under x for the first key,
    whose commit then fails (the key exists): the second key, under c, must not pass as
    checked (it closes b -> c -> b): it is sent unchecked, and its commit, which finds b without a
    parent, has it checked against what the batch wrote, and refused."""
    svc = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0, num_shards=shards)
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    x, b, c = h("cy2-x"), h("cy2-b"), h("cy2-c")
    b0, b1 = f"{b}_0_k", f"{b}_1_k"
    for key in (x, b0):
        await svc.put_start("c", key, [64])
        await svc.put_end("c", key)
    res = await svc.batch_put_start(
        "c",
        [b0, b1, c],
        [[64]] * 3,
        [
            ReplicateConfig(parent_block_hash=x),
            ReplicateConfig(parent_block_hash=c),
            ReplicateConfig(parent_block_hash=b),
        ],
    )
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.OBJECT_ALREADY_EXISTS
    assert isinstance(res[1], MooncakeError) and res[1].code == ErrorCode.INVALID_PARAMS
    assert "cycle" in res[1].message or "another parent" in res[1].message, res[1]
    ok = [k for k, r in zip([b0, b1, c], res) if not isinstance(r, MooncakeError)]
    for key in ok:
        await svc.put_end("c", key)
    report = await fsck(svc)
    assert report.clean, report.to_dict()


async def forge_cycle(svc: MasterService, ring: list[str]) -> None:
    """What an older version (or two racing registrations) could leave: each node of ``ring``
    names the previous one as its parent, with the edges, written straight into Redis."""
    client = svc.backend.client
    keys = svc.keys
    for i, node in enumerate(ring):
        parent = ring[i - 1]
        ps, cs = keys.shard_of(parent), keys.shard_of(node)
        gen = 1_000 + i
        await client.hset(
            keys.node(cs, node),
            mapping={"p": node_child_field(parent), PSHARD: ps, "g": gen},
        )
        await client.hset(keys.node(ps, parent), node_child_field(node), gen)
        await client.hincrby(keys.node(ps, parent), NCHILD, 1)
        await client.zrem(keys.shard_key(ps, "leaves"), parent)


async def test_repair_breaks_an_old_cycle(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0)
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    ring = [next(hashes_in_shard(svc, i, f"old{i}")) for i in (1, 2, 3)]
    tail = h("tail-of-old-ring")
    for block in ring:
        await svc.put_start("c", block, [64])
        await svc.put_end("c", block)
    await svc.put_start("c", tail, [64], ReplicateConfig(parent_block_hash=ring[0]))
    await svc.put_end("c", tail)
    await forge_cycle(svc, ring)
    report = await fsck(svc)
    assert report.kinds() == {"cycle": 1}, report.to_dict()
    # Nodes on the cycle are never leaves: a forced pass to ratio 0 frees only the tail.
    await svc.evict_once(force=True, target_ratio=0.0)
    assert await svc.batch_exist_key(ring) == [True, True, True]
    report = await fsck(svc, repair=True, grace_ms=-1)
    assert all(p.repaired for p in report.problems if p.kind == "cycle"), report.to_dict()
    report = await fsck(svc)
    assert report.clean, report.to_dict()
    await evicts_everything(svc, ring)
