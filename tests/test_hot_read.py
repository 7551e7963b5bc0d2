"""Schema 7: a registered object's ``rad`` is '2' when it also has a pin or a stored prefix
(``sp``, ``hp``, ``pfx``, ``pl``), '1' otherwise. A block key's grant (exists, get replica list)
reads only the fields a plain registered block holds, all present, and the whole object only
at rad '2' (store.lua store_grant_read): these are the cases where the mark must be right, or a
grant would miss a soft pin to refresh (three backends)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.fsck import fsck
from mooncake_redis.keys import HASH_FIELDS
from mooncake_redis.models import ReplicateConfig
from tests.helpers import h
from tests.test_store_basic import mounted


async def rad(svc: MasterService, key: str) -> bytes | None:
    got: bytes | None = await svc.backend.client.hget(
        svc.keys.obj(svc.shard_of_key(key), key), HASH_FIELDS["obj"]["radix"]
    )
    return got


async def stored(svc: MasterService, key: str, **cfg: Any) -> None:
    await svc.put_start("c", key, [64], ReplicateConfig(**cfg))
    await svc.put_end("c", key)


async def test_the_mark_says_what_the_object_holds(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    plain, soft, hard, mha = h("hot-plain"), h("hot-soft"), h("hot-hard"), h("hot-mha") + "_0_k"
    await stored(svc, plain)
    await stored(svc, soft, with_soft_pin=True)
    await stored(svc, hard, with_hard_pin=True)
    await stored(svc, mha)  # its prefix is a head of the key: pl
    assert [await rad(svc, k) for k in (plain, soft, hard, mha)] == [b"1", b"2", b"2", b"2"]
    assert await svc.batch_exist_key([plain, soft, hard, mha, h("hot-absent")]) == [
        True,
        True,
        True,
        True,
        False,
    ]
    assert (await fsck(svc)).clean


@pytest.mark.parametrize("exist", [True, False])
async def test_a_pin_added_by_an_upsert_is_refreshed_by_the_next_grant(
    make_service: Any, exist: bool
) -> None:
    """An upsert in place that asks for a soft pin marks the registered block '2'; the next
    grant then reads and extends the pin (a hot read at '1' would not see it)."""
    svc = await mounted(
        make_service,
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=5_000,
        default_kv_soft_pin_ttl_ms=9_000,
    )
    blk = h(f"hot-upsert-{exist}")
    await stored(svc, blk)
    assert await rad(svc, blk) == b"1"
    await svc.upsert_start("c", blk, [64], ReplicateConfig(with_soft_pin=True))
    await svc.upsert_end("c", blk)
    assert await rad(svc, blk) == b"2"
    okey = svc.keys.obj(svc.shard_of_key(blk), blk)
    await svc.backend.client.hset(okey, "sp", "7")  # an old pin: the grant must extend it
    before = int(time.time() * 1000)
    if exist:
        assert await svc.batch_exist_key([blk]) == [True]
    else:
        [got] = await svc.batch_get_replica_list([blk])
        assert len(getattr(got, "replicas", [])) == 1, got
    assert int(await svc.backend.client.hget(okey, "sp")) >= before + 9_000 - 1_000


async def test_an_upsert_hard_pin_marks_the_block(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    blk = h("hot-upsert-hard")
    await stored(svc, blk, with_soft_pin=False)
    await svc.upsert_start("c", blk, [128], ReplicateConfig(with_hard_pin=True))  # new buffers
    await svc.upsert_end("c", blk)
    assert await rad(svc, blk) == b"2"
    assert (await fsck(svc)).clean


async def test_fsck_names_a_pin_the_mark_hides(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    blk = h("hot-unmarked")
    await stored(svc, blk)
    await svc.backend.client.hset(svc.keys.obj(svc.shard_of_key(blk), blk), "sp", "1")
    report = await fsck(svc)
    assert report.kinds().get("object_extras_unmarked") == 1, report.to_dict()
    assert [p.node for p in report.problems if p.kind == "object_extras_unmarked"] == [blk]


async def test_without_a_tree_a_block_key_is_read_whole(make_service: Any) -> None:
    """No radix flag: no rad, no node fields; the grant reads the object's own fields (the
    soft pin among them) in one HMGET."""
    svc = await mounted(make_service, default_kv_soft_pin_ttl_ms=9_000)
    blk = h("hot-flat")
    await stored(svc, blk, with_soft_pin=True)
    assert await rad(svc, blk) is None
    okey = svc.keys.obj(svc.shard_of_key(blk), blk)
    await svc.backend.client.hset(okey, "sp", "7")
    before = int(time.time() * 1000)
    assert await svc.batch_exist_key([blk]) == [True]
    assert int(await svc.backend.client.hget(okey, "sp")) >= before + 9_000 - 1_000
