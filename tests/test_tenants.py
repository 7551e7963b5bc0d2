"""Tenants on three backends: ``MasterService.tenant(t)`` keeps each tenant's objects apart
(Mooncake's scoped key), ``"default"`` is today's keys unchanged, radix nodes and parent links
stay inside a tenant, and the unscoped library keeps seeing the whole store."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig
from mooncake_redis.prefix import split_scoped
from mooncake_redis.tenants import check_tenant, scoped_prefix
from tests.helpers import h
from tests.test_store_basic import C, mounted


async def put(scope: Any, key: str, size: int = 100, parent: str = "") -> None:
    await scope.put_start(C, key, [size], ReplicateConfig(parent_block_hash=parent))
    await scope.put_end(C, key)


async def test_same_key_in_two_tenants(make_service: Any) -> None:
    svc: MasterService = await mounted(make_service, enable_radix_tree=True)
    d, t1, t2 = svc.tenant("default"), svc.tenant("t1"), svc.tenant("t2")
    await put(d, "k", 100)
    await put(t1, "k", 200)
    assert (await svc.get_replica_list("k")).replicas[0].size == 100  # default = unscoped
    assert (await d.get_replica_list("k")).replicas[0].size == 100
    assert (await t1.get_replica_list("k")).replicas[0].size == 200
    assert not await t2.exist_key("k")
    assert await t2.batch_exist_key(["k"]) == [False]
    with pytest.raises(MooncakeError) as e:
        await t2.get_replica_list("k")
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    with pytest.raises(MooncakeError) as e:
        await put(t2, "k", 0)
    assert e.value.code == ErrorCode.INVALID_PARAMS
    await t1.upsert_start(C, "k", [300])
    await t1.upsert_end(C, "k")
    assert (await d.get_replica_list("k")).replicas[0].size == 100
    assert (await t1.get_replica_list("k")).replicas[0].size == 300
    await t1.remove("k", force=True)
    assert await d.exist_key("k") and not await t1.exist_key("k")
    assert (await fsck(svc)).clean


async def test_regex_and_remove_all_are_scoped(make_service: Any) -> None:
    svc: MasterService = await mounted(make_service)
    d, t1 = svc.tenant(""), svc.tenant("t1")  # "" is "default"
    for k in ("a1", "a2", "b1"):
        await put(d, k)
        await put(t1, k)
    assert sorted(await t1.get_replica_list_by_regex("^a")) == ["a1", "a2"]
    assert await t1.remove_by_regex("^a", force=True) == 2
    assert await d.batch_exist_key(["a1", "a2", "b1"]) == [True, True, True]
    assert await d.remove_all(force=True) == 3
    assert await t1.batch_exist_key(["b1"]) == [True]
    assert await t1.remove_all(force=True) == 1
    assert (await fsck(svc)).clean


async def test_radix_links_stay_inside_a_tenant(make_service: Any) -> None:
    svc: MasterService = await mounted(make_service, enable_radix_tree=True)
    d, t1 = svc.tenant("default"), svc.tenant("t1")
    root, child = h("root"), h("child")
    await put(d, root)
    # The parent is stored in "default" only: in t1 it is not stored, the guard refuses.
    with pytest.raises(MooncakeError) as e:
        await put(t1, child, parent=root)
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    await put(t1, root)
    await put(t1, child, parent=root)
    node = await svc.get_keys_by_prefix(scoped_prefix("t1", child))
    assert node.parent_prefix_hash == scoped_prefix("t1", root)
    assert (await svc.get_keys_by_prefix(root)).children == []  # default's root: no child
    assert (await fsck(svc)).clean


async def test_bad_tenants_and_keys(make_service: Any) -> None:
    svc: MasterService = await mounted(make_service)
    for bad in ("_x", "a\tb", "caf\u00e9", "x" * 5000):
        with pytest.raises(MooncakeError) as e:
            svc.tenant(bad)
        assert e.value.code == ErrorCode.INVALID_PARAMS
    assert check_tenant("") == "default" and check_tenant("t 1~") == "t 1~"
    t1, d = svc.tenant("t1"), svc.tenant("default")
    res = await t1.batch_exist_key(["ok", "a\0b", ""])
    assert res[:2] == [False, False] and isinstance(res[2], MooncakeError)
    # Keys with NULs are plain keys in every tenant, but a default key may not take the form
    # of another tenant's key ("\0t1\0k").
    await put(d, "a\0b")
    await put(t1, "\0x\0y")
    assert await d.exist_key("a\0b") and await t1.exist_key("\0x\0y")
    assert not await t1.exist_key("a\0b")
    with pytest.raises(MooncakeError) as e:
        await d.exist_key("\0t1\0ok")
    assert e.value.code == ErrorCode.INVALID_PARAMS
    assert await d.exist_key("\0_x\0k") is False  # not a tenant key's form: a plain key
    assert sorted(await d.get_replica_list_by_regex("^")) == ["a\0b"]
    assert sorted(await t1.get_replica_list_by_regex("^")) == ["\0x\0y"]
    assert (await fsck(svc)).clean


def test_split_is_exact() -> None:
    assert split_scoped("\0t1\0k\0z") == ("t1", "k\0z")
    for plain in ("k", "\0", "\0\0k", "\0t1\0", "\0_t\0k", "\0t\x01\0k", "a\0t\0k"):
        assert split_scoped(plain) is None, plain


async def test_scoped_batch_needs_one_config_per_key(make_service: Any) -> None:
    """A config list of another length is INVALID_PARAMS in a tenant, as unscoped (it was an
    IndexError, or silently cut short)."""
    svc: MasterService = await mounted(make_service)
    for cfgs in ([None], [None, None, None]):
        for scope in (svc, svc.tenant("t1")):
            with pytest.raises(MooncakeError) as exc:
                await scope.batch_put_start("c", ["a", "b"], [1, 1], cfgs)
            assert exc.value.code == ErrorCode.INVALID_PARAMS
