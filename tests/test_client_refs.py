"""Schema 8: an object's client ``c`` is a ref into its shard's client table ``{ns:i}:cids``
(ref -> client id, '=' client id -> ref), not the client id itself: a real Mooncake client's id
is a 36-byte UUID, stored once per shard instead of once per object. The ownership checks of
PutEnd / PutRevoke / UpsertStart behave as before (three backends)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.cli.inspect import gather_key
from mooncake_redis.fsck import fsck
from mooncake_redis.keys import HASH_FIELDS
from tests.helpers import h
from tests.test_store_basic import assert_clean, mounted

CLIENT = HASH_FIELDS["obj"]["client"]


async def stored_client(svc: MasterService, key: str) -> bytes:
    raw = await svc.backend.client.hget(svc.keys.obj(svc.shard_of_key(key), key), CLIENT)
    assert isinstance(raw, bytes)
    return raw


async def one_object(make_service: Any, name: str) -> tuple[MasterService, str]:
    svc = await mounted(make_service, enable_radix_tree=True)
    key = h(name)
    await svc.put_start("c", key, [100])
    await svc.put_end("c", key)
    return svc, key


async def table(svc: MasterService, key: str) -> dict[str, str]:
    raw = await svc.backend.client.hgetall(svc.keys.shard_key(svc.shard_of_key(key), "cids"))
    return {k.decode(): v.decode() for k, v in raw.items()}


async def test_objects_store_a_short_ref_and_the_table_maps_both_ways(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    keys = [h("ref-mla"), h("ref-mha") + "_0_k", h("ref-other")]
    for key in keys:
        await svc.put_start(a, key, [100])
        await svc.put_end(a, key)
    other = h("ref-b")
    await svc.put_start(b, other, [100])
    await svc.put_end(b, other)
    for key in keys:
        ref = (await stored_client(svc, key)).decode()
        assert len(ref) < 4 and ref.isdigit(), ref
        t = await table(svc, key)
        assert t[ref] == a and t["=" + a] == ref
    ref_b = (await stored_client(svc, other)).decode()
    t = await table(svc, other)
    assert t[ref_b] == b and t["=" + b] == ref_b and int(t["#"]) >= int(ref_b)
    doc = await gather_key(svc, keys[1])
    assert doc["client_id"] == a
    assert doc["metadata"]["c"] == (await stored_client(svc, keys[1])).decode()
    await assert_clean(svc)


async def test_ownership_checks_compare_the_client_ids(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    owner, other, stranger = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    key, seen = h("own"), h("own-seen")
    await svc.put_start(owner, key, [100])
    # 'other' has a ref in some shards (it put a key), 'stranger' in none: both are refused.
    await svc.put_start(other, seen, [100])
    await svc.put_end(other, seen)
    for client in (other, stranger):
        with pytest.raises(MooncakeError) as exc:
            await svc.put_end(client, key)
        assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
        with pytest.raises(MooncakeError) as exc:
            await svc.put_revoke(client, key)
        assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    assert await svc.exist_key(key) is False  # still in progress, untouched
    [res] = await svc.batch_put_end(owner, [key])
    assert res is None
    await svc.put_end(owner, key)  # again: idempotent for its client
    with pytest.raises(MooncakeError) as exc:
        await svc.put_end(other, key)
    assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    assert await svc.exist_key(key) is True
    assert stranger not in (await table(svc, key)).values()  # a refused check interns nothing
    await assert_clean(svc)


async def test_an_upsert_hands_the_object_to_its_client(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    key = h("ups")
    await svc.put_start(first, key, [100])
    await svc.put_end(first, key)
    await svc.upsert_start(second, key, [100])  # same size: in place, now second's put
    with pytest.raises(MooncakeError) as exc:
        await svc.upsert_end(first, key)
    assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    await svc.upsert_end(second, key)
    t = await table(svc, key)
    assert t[(await stored_client(svc, key)).decode()] == second
    await assert_clean(svc)


async def test_fsck_names_an_object_whose_client_ref_is_unknown(make_service: Any) -> None:
    svc, key = await one_object(make_service, "bogus")
    await svc.backend.client.hset(svc.keys.obj(svc.shard_of_key(key), key), CLIENT, "999")
    report = await fsck(svc)
    assert [p.kind for p in report.problems] == ["object_client_unknown"], report.problems


async def test_a_batch_over_many_shards_checks_each_shard(make_service: Any) -> None:
    svc = await mounted(make_service, enable_radix_tree=True)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    keys = [h(f"many{i}") for i in range(24)]
    assert len({svc.shard_of_key(k) for k in keys}) > 1
    res = await svc.batch_put_start(a, keys, [[100]] * len(keys))
    assert all(isinstance(r, list) for r in res), res
    # b has a ref in some of these shards (its own put), none in the others: refused in all.
    await svc.put_start(b, keys[0] + "_0_k", [100])
    ended = await svc.batch_put_end(b, keys)
    assert all(isinstance(e, MooncakeError) and e.code == ErrorCode.ILLEGAL_CLIENT for e in ended)
    assert await svc.batch_put_end(a, keys) == [None] * len(keys)
    assert all(await svc.batch_exist_key(keys))
    for key in keys:
        assert (await table(svc, key))[(await stored_client(svc, key)).decode()] == a
    await svc.put_end(b, keys[0] + "_0_k")
    await assert_clean(svc)


async def test_fsck_names_an_inconsistent_client_table(make_service: Any) -> None:
    svc, key = await one_object(make_service, "table")
    cids = svc.keys.shard_key(svc.shard_of_key(key), "cids")
    await svc.backend.client.hset(cids, "#", "0")  # the next client would reuse ref 1
    await svc.backend.client.hset(cids, "=other", "1")  # a second id naming ref 1
    report = await fsck(svc)
    problems = [p for p in report.problems if p.kind == "client_table"]
    assert len(problems) == 2 and {p.kind for p in report.problems} == {"client_table"}, problems
