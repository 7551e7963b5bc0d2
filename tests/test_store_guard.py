"""The radix put guard: the store never holds an orphan (a stored block whose parent block is not
stored) or a partial block because of a put, on every backend."""

from __future__ import annotations

from typing import Any

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h, mha_keys

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


async def test_guard_off_keeps_rfc_shells(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20, radix_put_guard=False)
    a, b = h("sa"), h("sb")
    [res] = await put_batch(svc, [(b, a)])
    assert not isinstance(res, MooncakeError)
    shell = await svc.get_keys_by_prefix(a)
    assert shell.is_shell and shell.children == [b]


async def test_unregistering_a_stored_key_leaves_fsck_clean(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20)
    a, b = h("ua"), h("ub")
    await put_batch(svc, [(a, ""), (b, a)])
    assert await svc.unregister_radix_tree_keys([b]) == 1
    assert (await svc.get_keys_by_prefix(a)).children == []
    assert await stored(svc, [b]) == [True]  # the object stays; only the index forgets it
    report = await fsck(svc)
    assert report.clean, report.to_dict()
