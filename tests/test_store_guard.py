"""The radix put guard: the store never holds an orphan (a stored block whose parent block is not
stored) or a partial block because of a put, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h, mha_keys, record_calls

C = "guard-client"


async def mounted(make_service: Any, size: int, **cfg: Any) -> MasterService:
    svc: MasterService = await make_service(enable_radix_tree=True, **cfg)
    await svc.mount_segment(Segment("g0", "g0", 1 << 40, size), C)
    return svc


async def put_batch(svc: MasterService, items: list[tuple[str, str]], size: int = 100) -> list[Any]:
    keys = [k for k, _ in items]
    res = await svc.batch_put_start(
        C, keys, [[size]] * len(keys), [ReplicateConfig(parent_block_hash=p) for _, p in items]
    )
    ok = [k for k, r in zip(keys, res) if not isinstance(r, MooncakeError)]
    await svc.batch_put_end(C, ok)
    return res


async def fsck_clean(svc: MasterService) -> None:
    report = await fsck(svc)
    assert report.clean, report.to_dict()


async def stored(svc: MasterService, keys: list[str]) -> list[bool]:
    return [r is True for r in await svc.batch_exist_key(keys)]


async def test_child_of_unstored_parent_is_refused(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20)
    a, b = h("ga"), h("gb")
    [res] = await put_batch(svc, [(b, a)])
    assert isinstance(res, MooncakeError) and res.code == ErrorCode.OBJECT_NOT_FOUND
    assert a in res.message
    assert await stored(svc, [b]) == [False]
    report = await fsck(svc)
    assert report.clean and report.counts["nodes"] == 0, report.to_dict()
    # Once the parent is stored, the child is accepted.
    await put_batch(svc, [(a, "")])
    [res] = await put_batch(svc, [(b, a)])
    assert not isinstance(res, MooncakeError)
    assert (await svc.get_keys_by_prefix(a)).children == [b]


async def test_parent_in_the_same_batch_is_enough(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20)
    chain = [h(f"gc{i}") for i in range(10)]
    res = await put_batch(svc, [(chain[i], chain[i - 1] if i else "") for i in range(10)])
    assert not any(isinstance(r, MooncakeError) for r in res)
    assert await stored(svc, chain) == [True] * 10


async def test_no_room_rolls_back_the_partial_block_and_its_children(make_service: Any) -> None:
    # Room for 10 objects of 100 bytes: an MHA block of 8 keys fits, the next block does not
    # fit whole, so none of it (nor its child) may stay.
    svc = await mounted(make_service, 1000)
    b0, b1, b2 = h("gm0"), h("gm1"), h("gm2")
    items = [(k, "") for k in mha_keys(b0, 4)]
    items += [(k, b0) for k in mha_keys(b1, 4)] + [(k, b1) for k in mha_keys(b2, 4)]
    res = await put_batch(svc, items)
    assert not any(isinstance(r, MooncakeError) for r in res[:8])
    assert all(isinstance(r, MooncakeError) for r in res[8:])
    assert await stored(svc, mha_keys(b0, 4)) == [True] * 8
    assert not any(await stored(svc, mha_keys(b1, 4) + mha_keys(b2, 4)))
    report = await fsck(svc)
    assert report.clean, report.to_dict()
    used = await svc.used_ratio()
    assert abs(used - 0.8) < 1e-9  # the rolled-back buffers were freed


@pytest.mark.parametrize("shards", [1, 8])
async def test_guard_off_keeps_rfc_shells(make_service: Any, shards: int) -> None:
    """Without the guard a put under a block that is not stored makes it a shell, whether the
    link step or (one shard) the put's commit links it."""
    svc = await mounted(make_service, 1 << 20, radix_put_guard=False, num_shards=shards)
    a, b = h("sa"), h("sb")
    calls = record_calls(svc)
    [res] = await put_batch(svc, [(b, a)])
    assert not isinstance(res, MooncakeError)
    if shards == 1:
        assert "radix_link" not in [x.name for x in calls]
    shell = await svc.get_keys_by_prefix(a)
    assert shell.is_shell and shell.children == [b]
    await fsck_clean(svc)


async def test_unregistering_a_stored_key_leaves_fsck_clean(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20)
    a, b = h("ua"), h("ub")
    await put_batch(svc, [(a, ""), (b, a)])
    assert await svc.unregister_radix_tree_keys([b]) == 1
    assert (await svc.get_keys_by_prefix(a)).children == []
    assert await stored(svc, [b]) == [True]  # the object stays; only the index forgets it
    report = await fsck(svc)
    assert report.clean, report.to_dict()


# The guard where the commit applies it: on one shard, a put whose parent is no block of the
# batch is linked by its commit (FOLD_STORED), which checks the parent in the same atomic call;
# on 8 shards most such puts keep the link step, whose stored flag the guard reads before the
# commit. Both must answer the same and leave the same store.


async def refused_cleanly(svc: MasterService, res: MooncakeError, parent: str) -> None:
    assert res.code == ErrorCode.OBJECT_NOT_FOUND, res
    assert res.message == (
        f"config.parent_block_hash: block {parent} is not stored (or is itself an orphan:"
        " its own parent block is gone); refusing an orphan (radix_put_guard)"
    )


@pytest.mark.parametrize("shards", [1, 8])
@pytest.mark.parametrize("parent_state", ["absent", "processing", "orphan"])
async def test_the_guard_refuses_a_child_of_a_parent_that_is_not_stored(
    make_service: Any, shards: int, parent_state: str
) -> None:
    """The parent block is absent, put but not ended, or stored under a parent that is gone
    (an orphan): a batch of an MHA block under it and a chain below that block is refused
    whole, with no buffer, node, edge or shell left of it."""
    svc = await mounted(make_service, 1 << 20, num_shards=shards)
    g, p, b, c = h("gs-g"), h("gs-p"), h("gs-b"), h("gs-c")
    if parent_state == "processing":
        [r] = await svc.batch_put_start(C, [p], [[100]], [ReplicateConfig()])
        assert isinstance(r, list)
    elif parent_state == "orphan":
        await put_batch(svc, [(g, ""), (p, g)])
        await svc.remove(g, force=True)
        assert await stored(svc, [g, p]) == [False, True]
    used = await svc.used_ratio()
    calls = record_calls(svc)
    items = [(k, p) for k in mha_keys(b, 2)] + [(c, b)]
    res = await put_batch(svc, items)
    for r in res[:4]:
        await refused_cleanly(svc, r, p)
    assert isinstance(res[4], MooncakeError) and "rolled back" in res[4].message, res[4]
    if shards == 1:  # linked (and refused) by the commit: no link step
        assert "radix_link" not in [x.name for x in calls]
    assert not any(await stored(svc, [*mha_keys(b, 2), c]))
    assert await svc.used_ratio() == used  # every buffer of the batch freed
    assert await svc.radix.get_nodes([b, c]) == [None, None]  # no node, no shell
    if parent_state != "absent":
        assert (await svc.get_keys_by_prefix(p)).children == []
    await fsck_clean(svc)


@pytest.mark.parametrize("shards", [1, 8])
async def test_the_guard_answers_already_exists_for_a_key_that_exists(
    make_service: Any, shards: int
) -> None:
    """A key that exists under a parent block that is gone: OBJECT_ALREADY_EXISTS, as the
    precheck answers it, and the stored object is untouched."""
    svc = await mounted(make_service, 1 << 20, num_shards=shards)
    a, b = h("ge-a"), h("ge-b")
    await put_batch(svc, [(a, ""), (b, a)])
    await svc.remove(a, force=True)
    [res] = await put_batch(svc, [(b, a)])
    assert isinstance(res, MooncakeError) and res.code == ErrorCode.OBJECT_ALREADY_EXISTS, res
    assert await stored(svc, [b]) == [True]
    [got] = await svc.batch_get_replica_list([b])
    assert not isinstance(got, MooncakeError) and [r.offset for r in got.replicas] == [100]


@pytest.mark.parametrize("shards", [1, 8])
async def test_a_child_of_a_stored_parent_is_linked_under_it(
    make_service: Any, shards: int
) -> None:
    """The common case: a request's new blocks under its stored prefix. On one shard no link
    step runs; the tree is what the link step would have made."""
    svc = await mounted(make_service, 1 << 20, num_shards=shards, default_kv_lease_ttl_ms=0)
    root = [h(f"gl{i}") for i in range(3)]
    await put_batch(svc, [(root[i], root[i - 1] if i else "") for i in range(3)])
    calls = record_calls(svc)
    new = [h(f"gl-new{i}") for i in range(3)]
    res = await put_batch(svc, [(new[i], new[i - 1] if i else root[-1]) for i in range(3)])
    assert not any(isinstance(r, MooncakeError) for r in res), res
    if shards == 1:
        assert "radix_link" not in [x.name for x in calls]
    assert (await svc.get_keys_by_prefix(root[-1])).children == [new[0]]
    assert (await svc.get_keys_by_prefix(new[0])).parent_prefix_hash == root[-1]
    assert await stored(svc, [*root, *new]) == [True] * 6
    # leaf first: the new tip goes first, the stored parent only after its new children
    result = await svc.evict_once(max_objects=4)
    assert result.evicted_objects == 4
    assert await stored(svc, [*root, *new]) == [True, True, False, False, False, False]
    await fsck_clean(svc)


@pytest.mark.parametrize("shards", [1, 8])
async def test_the_guard_answers_first_for_a_put_that_got_no_buffer(
    make_service: Any, shards: int
) -> None:
    """A put under a parent block that is not stored, which also finds no room: the guard's
    OBJECT_NOT_FOUND, whether the link step or the commit would have guarded it (the latter
    never runs for a put without a buffer: the no-buffer check applies the guard then)."""
    svc = await mounted(make_service, 1000, num_shards=shards)
    a, b, f = h("gn-a"), h("gn-b"), h("gn-fill")
    await put_batch(svc, [(f, "")], size=900)
    [res] = await put_batch(svc, [(b, a)], size=200)
    await refused_cleanly(svc, res, a)
    assert await svc.radix.get_nodes([a, b]) == [None, None]
    await fsck_clean(svc)
