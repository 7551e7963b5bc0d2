"""Schema 6: a key of 64 bytes (an MLA key, the block hash itself) keeps its object's fields in
its block hash ``{ns:i}:n:<key>``, beside its radix node. The two field sets are disjoint and
each kind is deleted field by field, so either may outlive the other in the same hash: these
are the cases where one goes and the other must stay (three backends)."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.keys import HASH_FIELDS, is_block_key
from mooncake_redis.models import ReplicateConfig
from tests.helpers import h
from tests.test_store_basic import C, assert_clean, mounted, put

PID = HASH_FIELDS["obj"]["put_id"]
CREATED = HASH_FIELDS["node"]["created_ms"]


async def fields(svc: MasterService, key: str) -> dict[bytes, bytes]:
    shard = svc.shard_of_key(key)
    raw: dict[bytes, bytes] = await svc.backend.client.hgetall(svc.keys.node(shard, key))
    return raw


async def test_block_key_object_and_node_share_one_hash(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    a, b = h("blk-a"), h("blk-b")
    await put(svc, a)
    await put(svc, b, parent_block_hash=a)
    shard = svc.shard_of_key(a)
    assert svc.keys.obj(shard, a) == svc.keys.node(shard, a)
    got = await fields(svc, a)
    assert got[PID.encode()] and got[CREATED.encode()]  # the object and the node, one hash
    assert not await svc.backend.client.exists(svc.keys.shard_tag(shard) + ":o:" + a)
    # The parent's object goes; its node stays (it has a child): only the object's fields go.
    await svc.remove(a, force=True)
    got = await fields(svc, a)
    assert PID.encode() not in got and got[CREATED.encode()]
    assert not set(got) & {f.encode() for f in HASH_FIELDS["obj"].values()}
    assert await svc.exist_key(a) is False and await svc.exist_key(b) is True
    node = await svc.get_keys_by_prefix(a)
    assert node.keys == [] and [c for c in node.children] == [b]
    assert a not in await svc.complete_objects() and b in await svc.complete_objects()
    assert await svc.objects.all_object_keys() == [b]  # a node-only block hash is no object
    await assert_clean(svc)
    # Put again: the object comes back into the same hash, beside the node.
    await put(svc, a)
    assert (await svc.get_keys_by_prefix(a)).keys == [a]
    assert await svc.exist_key(a) is True
    await assert_clean(svc)


async def test_node_collapse_keeps_an_unregistered_object(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    a = h("unreg")
    await put(svc, a)
    assert await svc.unregister_radix_tree_keys([a]) == 1
    got = await fields(svc, a)
    # The node had only this key: it is gone, the object (now of no tree) stays whole.
    assert CREATED.encode() not in got and got[PID.encode()]
    assert await svc.get_nodes([a]) == [None]
    assert await svc.exist_key(a) is True
    assert (await svc.get_replica_list(a)).replicas
    assert a in await svc.complete_objects()
    await assert_clean(svc)
    await svc.remove(a, force=True)
    assert await fields(svc, a) == {}
    await assert_clean(svc)


@pytest.mark.parametrize("radix", [True, False])
async def test_any_64_byte_key_lives_in_its_block_hash(make_service: Any, radix: bool) -> None:
    svc = await mounted(make_service, enable_radix_tree=radix)
    keys = ["x" * 64, "k/" + "z" * 62, "é" * 32, "y" * 63, "w" * 65]  # the last two: :o:
    assert [is_block_key(k) for k in keys] == [True, True, True, False, False]
    for k in keys:
        await put(svc, k)
    assert await svc.batch_exist_key(keys) == [True] * len(keys)
    assert sorted(await svc.objects.all_object_keys()) == sorted(keys)
    assert sorted(await svc.complete_objects()) == sorted(keys)
    for k in keys[:3]:
        shard = svc.shard_of_key(k)
        assert await svc.backend.client.exists(svc.keys.node(shard, k))
        node = await svc.get_nodes([k])
        assert (node[0] is not None) == radix  # radix off: the hash holds only the object
    await assert_clean(svc)
    assert await svc.remove_by_regex("^x", force=True) == 1
    with pytest.raises(MooncakeError) as e:
        await svc.get_replica_list("x" * 64)
    assert e.value.code == ErrorCode.OBJECT_NOT_FOUND
    assert await svc.remove_all(force=True) == len(keys) - 1
    assert await svc.objects.all_object_keys() == []
    await assert_clean(svc)


async def test_complete_keys_are_the_complete_objects(make_service: Any) -> None:
    """``complete_keys`` (the key list of the admin ``/get_all_keys`` and of the replay's
    health samples) reads a status per SCAN hit and names the object from the hit itself
    (``K.obj_id``): it must find exactly the COMPLETE objects, in ``:o:`` hashes and in block
    hashes, across shards, and nothing else a block hash or ``:o:`` name can look like."""
    svc = await mounted(make_service, enable_radix_tree=True)
    a, b = h("ck-a"), h("ck-b")
    done = [a, b, h("ck-c") + "_0_k", "é" * 32, "y" * 63, "w" * 65, "q}:n:" + "z" * 59, "r:o:x"]
    await put(svc, a)
    await put(svc, b, parent_block_hash=a)
    for k in done[2:]:
        await put(svc, k)
    writing = h("ck-writing")  # put started, never ended: PROCESSING, not listed
    await svc.put_start(C, writing, [1000], ReplicateConfig())
    await svc.remove(a, force=True)  # a node-only block hash: its object goes, b keeps its node
    done.remove(a)
    keys = await svc.complete_keys()
    assert keys == set(done)
    assert set(await svc.complete_objects()) == keys
    assert await svc.batch_exist_key(sorted(keys)) == [True] * len(keys)
    assert await svc.exist_key(writing) is False
