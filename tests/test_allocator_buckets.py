"""The allocator's bucketed records (schema 4, lua/includes/alloc.lua): records in listpack
buckets of one offset range, pending state inside the record, a bucket index the janitor reads.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from blake3 import blake3

from mooncake_redis import MasterService
from mooncake_redis.allocation import segment_records
from mooncake_redis.lua_calls import alloc_free
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.records import (
    alloc_bucket_of,
    alloc_offset,
    alloc_owner,
    alloc_owner_key,
    parse_alloc_record,
)
from tests.test_store_basic import C, assert_clean


def keys_of(n: int, salt: str) -> list[str]:
    return [blake3(f"{salt}/{i}".encode()).hexdigest() for i in range(n)]


async def mounted(make_service: Any, size: int, **cfg: Any) -> MasterService:
    svc: MasterService = await make_service(**cfg)
    await svc.mount_segment(Segment("s", "s", 1 << 40, size), C)
    return svc


async def put_all(svc: MasterService, keys: list[str], size: int) -> None:
    res = await svc.batch_put_start(C, keys, [[size]] * len(keys), ReplicateConfig())
    assert all(isinstance(r, list) and r for r in res), res[:2]
    assert await svc.batch_put_end(C, keys) == [None] * len(keys)


async def index_of(svc: MasterService) -> dict[str, float]:
    raw = await svc.backend.client.zrange(
        svc.keys.segment_key("s", "alloc_index"), 0, -1, withscores=True
    )
    return {b.decode(): float(score) for b, score in raw}


async def all_records(svc: MasterService) -> dict[int, Any]:
    out: dict[int, Any] = {}
    async for page in segment_records(svc.backend, svc.keys, "s", 2):
        out.update(page)
    return out


def test_owner_and_record_decoding() -> None:
    block = "ab" * 32
    for key in (block, block + "_0_k", "plain key|with bars", "\0t\0" + block, block[:63]):
        assert alloc_owner_key(alloc_owner(key)) == key
    assert alloc_owner(block) == b">" + bytes.fromhex(block)  # 33 bytes for a block hash
    assert alloc_owner("k") == b"<k"
    rec = parse_alloc_record(b"1000|pid|1733000000000", b"<k")
    assert (rec.length, rec.put_id, rec.ms, rec.owner) == (4096, "pid", 1733000000000, "k")
    assert parse_alloc_record(b"1000|pid|", b"<k").ms is None
    for off, shift in ((0, 6), ((1 << 64) - 1, 6), ((1 << 64) - 1, 31), (12345 << 20, 18)):
        b, rel = alloc_bucket_of(off, shift)
        assert alloc_offset(b, rel, shift) == off


async def test_records_of_one_size_fill_listpack_buckets(make_service: Any) -> None:
    n, size = 300, 4096
    svc = await mounted(make_service, n * size)
    keys = keys_of(n, "lp")
    await put_all(svc, keys, size)
    info = await svc.backend.client.hgetall(svc.keys.segment_anchor("s"))
    assert info[b"ak"] == b"18"  # 2^18 / 4096: 64 records a bucket
    index = await index_of(svc)
    assert len(index) == -(-n // 64)
    client = svc.backend.client
    for b in index:
        bucket = svc.keys.alloc_bucket("s", b)
        assert await client.hlen(bucket) <= 128
        if not svc.config.redis_url.startswith("fakeredis"):
            assert await client.object("ENCODING", bucket) == b"listpack"
    recs = await all_records(svc)
    assert sorted(r.owner for r in recs.values()) == sorted(keys)
    assert all(r.ms is not None and r.length == size for r in recs.values())
    [st] = await svc.segment_stats()
    assert (st.allocations, st.pending, st.allocated) == (n, n, n * size)
    await assert_clean(svc)


async def test_janitor_confirms_by_bucket_and_fixes_stale_scores(make_service: Any) -> None:
    # A deadline a loaded machine's stall between reserve and commit cannot pass.
    svc = await mounted(
        make_service, 1 << 20, alloc_commit_deadline_ms=1000, alloc_reclaim_grace_ms=1100
    )
    keys = keys_of(100, "jn")
    await put_all(svc, keys, 1000)
    # A pending record freed (its object removed before the janitor ran): its bucket's score
    # stays a lower bound.
    recs = await all_records(svc)
    await svc.remove(min(recs.items())[1].owner, force=True)
    before = await index_of(svc)
    assert all(score < float("inf") for score in before.values())
    await asyncio.sleep(1.15)
    rep = await svc.run_janitor_once(force=True)
    assert rep.confirmed_allocations == 99 and rep.reclaimed_allocations == 0
    after = await index_of(svc)
    assert set(after) == set(before) and all(s == float("inf") for s in after.values())
    [st] = await svc.segment_stats()
    assert (st.allocations, st.pending) == (99, 0)
    assert all(r.ms is None for r in (await all_records(svc)).values())
    rep = await svc.run_janitor_once(force=True)
    assert rep.confirmed_allocations == 0  # nothing due is read again
    await assert_clean(svc)


async def test_double_and_foreign_frees_do_nothing(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20)
    [key] = keys_of(1, "df")
    await put_all(svc, [key], 5000)
    [(off, rec)] = (await all_records(svc)).items()
    hexoff = format(off, "016x")
    await alloc_free(svc.ctx, {"s": [(hexoff, "another put id")]})
    assert len(await all_records(svc)) == 1
    await alloc_free(svc.ctx, {"s": [(hexoff, rec.put_id)]})
    await alloc_free(svc.ctx, {"s": [(hexoff, rec.put_id)]})  # a second free: nothing
    [st] = await svc.segment_stats()
    assert (st.allocations, st.pending, st.allocated) == (0, 0, 0)
    assert await index_of(svc) == {}


async def test_an_empty_segment_picks_its_bucket_shift_again(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 24, default_kv_lease_ttl_ms=0)
    small = keys_of(10, "small")
    await put_all(svc, small, 64)
    anchor = svc.keys.segment_anchor("s")
    assert await svc.backend.client.hget(anchor, "ak") == b"12"
    big = keys_of(10, "big")
    await put_all(svc, big, 1 << 16)  # mixed in: still correct
    await assert_clean(svc)
    await svc.batch_remove(small + big, force=True)
    [st] = await svc.segment_stats()
    assert (st.allocations, st.allocated) == (0, 0)
    await put_all(svc, keys_of(3, "again"), 1 << 16)
    assert await svc.backend.client.hget(anchor, "ak") == b"22"
    await assert_clean(svc)


async def test_smaller_sizes_past_a_bucket_stay_correct(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20, default_kv_lease_ttl_ms=0)
    await put_all(svc, keys_of(1, "first"), 4096)  # ak 18: 256 KiB buckets
    many = keys_of(200, "tiny")
    await put_all(svc, many, 16)  # 200 records in one bucket: a hashtable, still found
    await assert_clean(svc)
    await svc.batch_remove(many, force=True)
    await assert_clean(svc)
    [st] = await svc.segment_stats()
    assert (st.allocations, st.allocated) == (1, 4096)


async def test_unmount_deletes_every_bucket(make_service: Any) -> None:
    svc = await mounted(make_service, 1 << 20, script_batch_size=4)
    keys = keys_of(40, "um")
    await put_all(svc, keys, 1024)  # ak 16: 64 records a bucket, 1 bucket; then smaller ones
    await put_all(svc, keys_of(30, "um2"), 8192)  # several buckets: unmount ends in batches
    assert len(await index_of(svc)) > 4
    await svc.unmount_segment("s", C)
    assert not any(await svc.batch_exist_key(keys))
    pattern = "{" + svc.keys.ns + ":s:*"
    left = [k async for k in svc.backend.client.scan_iter(match=pattern)]
    assert left == []
    await assert_clean(svc)


async def test_inspect_key_decodes_the_allocation(make_service: Any) -> None:
    from mooncake_redis.cli.inspect import gather_key

    svc = await mounted(make_service, 1 << 20)
    [key] = keys_of(1, "ik")
    await put_all(svc, [key], 4096)
    [a] = (await gather_key(svc, key))["allocations"]
    assert a["record"]["owner"] == key and a["record"]["length"] == 4096
    assert a["record"]["pending_ms"] > 0 and a["redis_cli"].startswith("HMGET '{")


async def test_a_crash_between_bucket_deletions_is_resumed(make_service: Any) -> None:
    """unmount's last step deletes record buckets a few per call (checkpoint unmount:buckets);
    a worker dying between two calls leaves a consistent unmounting segment that the janitor
    finishes."""
    svc = await mounted(make_service, 1 << 20, script_batch_size=64)  # one bucket per call
    keys = keys_of(70, "cb")
    await put_all(svc, keys, 1024)  # ak 16: two buckets
    assert len(await index_of(svc)) == 2

    async def crash(step: str) -> None:
        if step == "unmount:buckets":
            raise RuntimeError("crash")

    svc.fault_hook = crash
    try:
        await svc.unmount_segment("s", C)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the unmount did not reach unmount:buckets")
    svc.fault_hook = None
    [st] = await svc.segment_stats()
    assert not st.mounted and st.allocations == 70 - 64 and st.allocated == (70 - 64) * 1024
    assert len(await index_of(svc)) == 1
    await assert_clean(svc)  # counters match what is left
    await svc.run_janitor_once(force=True)  # resume_unmounts
    assert await svc.segment_stats() == []
    pattern = "{" + svc.keys.ns + ":s:*"
    assert [k async for k in svc.backend.client.scan_iter(match=pattern)] == []
    await assert_clean(svc)


async def test_fsck_finds_a_broken_bucket_index_and_counts(make_service: Any) -> None:
    from mooncake_redis.fsck import fsck

    svc = await mounted(make_service, 1 << 20)
    await put_all(svc, keys_of(10, "fi"), 4096)
    client = svc.backend.client
    [b] = await index_of(svc)
    await client.zrem(svc.keys.segment_key("s", "alloc_index"), b)
    await client.hincrby(svc.keys.segment_anchor("s"), "pending", 1)
    kinds = (await fsck(svc)).kinds()
    assert kinds.get("alloc_index") == 1 and kinds.get("allocation_count") == 1, kinds
    # A bucket due later than its oldest pending record would never be read in time.
    await client.zadd(svc.keys.segment_key("s", "alloc_index"), {b: float("inf")})
    kinds = (await fsck(svc)).kinds()
    assert kinds.get("alloc_index") == 10, kinds


async def test_number_fast_paths_write_what_the_u64_strings_do(make_service: Any) -> None:
    """alloc.lua works on Lua numbers below 2^52 and on u64 strings past that: the bucket and
    rel of an offset, the offset of a bucket and rel, and the hex helpers are the same strings
    either way (Redis has bit.tohex, fakeredis takes string.format)."""
    from mooncake_redis.lua_loader import expand, lua_dir

    body = """
local out = {}
for i = 1, #ARGV, 3 do
  local off, ak, x = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local b, rel = alloc_bucket(off, ak)
  local n = u64_small(off)
  table.insert(out, { b, rel, alloc_offset(b, rel, ak), n and u64_of(n) or '', hex_short(x),
    hex8(x) })
end
return out
"""
    script = expand("--!include alloc.lua\n" + body, lua_dir() / "includes")
    rng = random.Random(13)
    offs = [0, 1, 63, 64, (1 << 52) - 1, 1 << 52, (1 << 52) + 1, (1 << 53) - 1, 1 << 53,
            (1 << 53) + 1, (1 << 64) - 1, (1 << 64) - 4096]  # fmt: skip
    offs += [rng.getrandbits(rng.choice([12, 32, 40, 51, 52, 53, 60, 64])) for _ in range(200)]
    xs = [0, 1, 15, 16, 255, 256, 4095, 4096, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]
    rows = []
    for i, off in enumerate(offs):
        x = xs[i] if i < len(xs) else rng.getrandbits(rng.choice([4, 12, 20, 31, 32]))
        rows.append((off, rng.choice([6, 7, 12, 13, 18, 31]) if i >= 12 else 6 + i % 26, x))
    svc: MasterService = await make_service()
    argv: list[Any] = []
    for off, ak, x in rows:
        argv += [f"{off:016x}", ak, x]
    # One key (never touched) routes the call on a cluster.
    got = await svc.backend.client.eval(script, 1, svc.keys.segment_anchor("t"), *argv)
    for (off, ak, x), g in zip(rows, got, strict=True):
        b, rel = alloc_bucket_of(off, ak)
        small = f"{off:016x}" if off < 1 << 52 else ""
        want = [b, rel, f"{off:016x}", small, format(x, "x"), f"{x:08x}"]
        assert [v.decode() for v in g] == want, (off, ak, x)


async def test_pending_and_confirm_read_records_written_out_of_place(make_service: Any) -> None:
    """alloc_pending finds an owner field that is not right after its record (a record written
    by someone else than alloc_take), and alloc_confirm rewrites a length with leading zeros
    as it always did (short hex)."""
    from mooncake_redis.lua_calls import alloc_confirm, alloc_pending

    svc = await mounted(make_service, 1 << 20)
    keys = keys_of(8, "oop")
    await put_all(svc, keys, 4096)
    client = svc.backend.client
    [bucket] = list(await index_of(svc))
    bkey = svc.keys.alloc_bucket("s", bucket)
    flat = list((await client.hgetall(bkey)).items())
    first, owner = flat[0], flat[1]
    assert owner[0] == first[0] + b"k"
    # The first record's owner field moves to the end, and its length gains leading zeros.
    await client.hdel(bkey, owner[0])
    await client.hset(bkey, owner[0], owner[1])
    await client.hset(bkey, first[0], b"000" + first[1])
    now = await svc.backend.time_ms()
    pending = await alloc_pending(svc.ctx, ["s"], now)
    assert sorted(p.owner for p in pending) == sorted(keys)
    await alloc_confirm(svc.ctx, {"s": [(p.offset, p.put_id) for p in pending]})
    after = await client.hgetall(bkey)
    assert after[first[0]] == first[1].rsplit(b"|", 1)[0] + b"|"
    assert all(v.endswith(b"|") for f, v in after.items() if not f.endswith(b"k"))
    [st] = await svc.segment_stats()
    assert (st.allocations, st.pending) == (8, 0)


async def test_a_refused_put_leaves_an_empty_segment_as_it_was(make_service: Any) -> None:
    """A put that reserved on an empty segment and was then refused (the key is another
    client's put in progress) undoes its reservation and leaves no bucket shift behind: the
    segment's info is what it was (test_fuzz_http found the leftover ak)."""
    from mooncake_redis import MooncakeError

    svc = await mounted(make_service, 1 << 20)
    await svc.put_start(C, "obj-a", [978], ReplicateConfig(preferred_segment="s"))
    await svc.mount_segment(Segment("e", "e", 1 << 41, 1 << 20), C)
    info = svc.keys.segment_anchor("e")
    before = await svc.backend.client.hgetall(info)
    try:
        await svc.put_start("other", "obj-a", [978], ReplicateConfig(preferred_segment="e"))
    except MooncakeError as e:
        assert e.code.name == "OBJECT_ALREADY_EXISTS"
    else:
        raise AssertionError("a second client's put of a key in progress was accepted")
    assert await svc.backend.client.hgetall(info) == before
    await assert_clean(svc)


async def test_a_batch_of_frees_leaves_the_free_extents_maximal(make_service: Any) -> None:
    """alloc_free releases a batch per record bucket and merges neighbouring frees before they
    reach the free ZSETs (alloc_release_batch). Shuffled, with an offset repeated (released
    once), one that is no record's and records of another put id (kept): what is left is the
    records not freed, and the free extents are exactly the maximal gaps between them, as
    releasing one by one leaves them; the segment's counters agree. (The objects still name the
    freed buffers: this drives the allocator alone, so fsck is not asked.)"""
    size, n = 1 << 20, 120
    svc = await mounted(make_service, size)
    await put_all(svc, keys_of(n, "batch-free"), 4096)
    recs = await all_records(svc)
    offs = sorted(recs)
    rng = random.Random(7)
    chosen = set(rng.sample(offs, 70))
    kept = [o for o in offs if o not in chosen]
    pairs = [(f"{o:016x}", recs[o].put_id) for o in sorted(chosen)]
    pairs += [*pairs[:5], (f"{offs[0] + 1:016x}", recs[offs[0]].put_id)]
    pairs += [(f"{o:016x}", "another-put") for o in kept[:3]]
    rng.shuffle(pairs)
    await alloc_free(svc.ctx, {"s": pairs})
    left = await all_records(svc)
    assert sorted(left) == kept
    client = svc.backend.client
    raw = await client.zrange(svc.keys.segment_key("s", "free_off"), 0, -1)
    free = sorted((int(m[:16], 16), int(m[16:32], 16)) for m in raw)
    by_len = await client.zrange(svc.keys.segment_key("s", "free_len"), 0, -1)
    assert sorted((int(m[16:32], 16), int(m[:16], 16)) for m in by_len) == free
    gaps, pos = [], 0  # offsets within the segment
    for o in kept:
        if o > pos:
            gaps.append((pos, o - pos))
        pos = o + recs[o].length
    if pos < size:
        gaps.append((pos, size - pos))
    assert free == gaps
    st = (await svc.segments.segment_stats(["s"]))[0]
    assert st.allocated == sum(recs[o].length for o in kept)
