"""fsck's check sets are named and run by fsck itself (issue 12 item 4), not registered into it on
import: the radix checks, the object store's, then the orphan check, which counts the stored
objects whose parent node has no stored key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mooncake_redis import MasterService
from mooncake_redis.fsck import CHECKS, check_orphans, check_radix, check_store, fsck
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import hashes_in_shard

MB = 1 << 20


async def put(svc: MasterService, block: str, parent: str = "") -> None:
    await svc.put_start("c", block, [64], ReplicateConfig(parent_block_hash=parent))
    await svc.put_end("c", block)


@pytest.fixture
async def svc(make_service: Any) -> MasterService:
    s: MasterService = await make_service(enable_radix_tree=True, default_kv_lease_ttl_ms=0)
    await s.mount_segment(Segment("s1", "s1", 1 << 40, MB), "c")
    return s


def test_the_check_sets_are_fscks_own_whatever_was_imported() -> None:
    """With only the fsck package imported (not the store), every check set is there."""
    code = (
        "import sys, json, mooncake_redis.fsck as f\n"
        "print(json.dumps([[c.__name__ for c in f.CHECKS], 'mooncake_redis.store' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert json.loads(out) == [["check_radix", "check_store", "check_orphans"], False]
    assert (check_radix, check_store, check_orphans) == CHECKS


async def test_each_check_set_reports(svc: MasterService) -> None:
    a, b = (next(hashes_in_shard(svc, i, f"set{i}")) for i in (1, 2))
    await put(svc, a)
    await put(svc, b, a)
    report = await fsck(svc)
    assert report.clean, report.to_dict()
    c = report.counts
    assert (c["nodes"], c["registered_keys"]) == (2, 2)  # radix
    assert (c["objects"], c["segments"]) == (2, 1)  # store
    assert (c["orphans"], c["orphan_roots"]) == (0, 0)  # orphans
    # The store's set finds what only it checks: replicas without their allocation record.
    client = svc.backend.client
    for b in await client.zrange(svc.keys.segment_key("s1", "alloc_index"), 0, -1):
        await client.delete(svc.keys.alloc_bucket("s1", b.decode()))
    kinds = (await fsck(svc)).kinds()
    assert kinds.get("replica_unallocated") == 2 and "allocated_bytes" in kinds, kinds


async def test_a_stored_object_under_a_parent_without_a_stored_key_is_an_orphan(
    svc: MasterService,
) -> None:
    a, b, c = (next(hashes_in_shard(svc, i, f"orph{i}")) for i in (1, 2, 3))
    await put(svc, a)
    await put(svc, b, a)
    await put(svc, c, b)
    await svc.remove(a, force=True)  # the parent node keeps no stored key
    report = await fsck(svc)
    assert report.clean, report.to_dict()  # counted, never a problem in itself
    counts = report.counts
    assert (counts["orphans"], counts["orphan_roots"], counts["orphaned_subtree_objects"]) == (
        1,
        1,
        2,
    )  # b is the orphan (its parent node has no stored key); c lies in b's subtree
    assert counts["orphan_roots_unindexed"] == 0 and counts["orphan_marks_stale"] == 0
    await put(svc, a)  # the parent is stored again: b is no orphan any more
    counts = (await fsck(svc)).counts
    assert (counts["orphans"], counts["orphan_roots"]) == (0, 0), counts


async def test_a_replica_record_that_names_no_segment_table_entry_is_reported(
    svc: MasterService,
) -> None:
    """The lean layout's replica record (``id,st,ref,off,len``) names its segment through the
    shard's segment table: fsck decodes it there, and a record whose ref the table lacks (or
    that is malformed) is a problem of its own, not a crash of fsck."""
    a, b = (next(hashes_in_shard(svc, i, f"rec{i}")) for i in (1, 2))
    await put(svc, a)
    await put(svc, b)
    keys, client = svc.keys, svc.backend.client
    assert (await fsck(svc)).clean
    ka, kb = keys.obj(keys.shard_of(a), a), keys.obj(keys.shard_of(b), b)
    rid, st, _ref, off, length = (await client.hget(ka, "r")).decode().split(",")
    await client.hset(ka, "r", ",".join([rid, st, "999", off, length]))
    await client.hset(kb, "r", "not a record")
    report = await fsck(svc)
    assert report.kinds()["replica_record"] == 2
    assert {p.node for p in report.problems if p.kind == "replica_record"} == {a, b}
