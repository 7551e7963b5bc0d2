"""The object store's fsck checks (invariants 3 and 4): segments, allocation records, objects.

It caches the stored object keys in the report for the orphan check.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ..keys import HASH_FIELDS, SEGMENT_SUFFIXES, node_key_field
from ..records import (
    AllocRecord,
    _s,
    bucket_records,
    client_table,
    from_u64hex,
    object_fields,
    object_prefix,
    parse_entry,
    replica_records,
    segment_table,
)
from ..scan import scan_match, shard_ids
from .report import FsckReport

if TYPE_CHECKING:
    from ..service import MasterService

PUT_ID = HASH_FIELDS["obj"]["put_id"]
RADIX = HASH_FIELDS["obj"]["radix"]


async def check_store(service: MasterService, report: FsckReport, now: int) -> None:
    """Invariant 3: inside every segment, allocations and free extents never overlap and tile
    [0, size); ``allocated`` equals the sum of the allocation records; every record is owned (an
    object replica with the same put id, a scheduled free in the discarded set or an outbox, or a
    reservation still pending); capacity is the sum of mounted segments. Invariant 4: every
    object's replicas point into mounted segments, at a record of their size and put id; objects
    registered in the radix index are in their node."""
    client = service.backend.client
    keys = service.keys
    reg = {_s(k): _s(v) for k, v in (await client.hgetall(keys.global_key("segments"))).items()}
    segs: dict[str, dict[str, Any]] = {}
    buckets = await _bucket_keys(service)
    capacity = allocated_total = 0
    for seg_id in sorted(reg):
        info = {
            _s(k): _s(v) for k, v in (await client.hgetall(keys.segment_anchor(seg_id))).items()
        }
        if not info:
            report.add("segment_without_allocator", seg_id, f"registry lists {seg_id} without info")
            continue
        size = from_u64hex(info["size"])
        # Free extents: free_off members are offset .. length, free_len members length ..
        # offset (u64 hex, lexicographically ordered, score 0).
        by_off = [_s(m) for m in await client.zrange(keys.segment_key(seg_id, "free_off"), 0, -1)]
        by_len = [_s(m) for m in await client.zrange(keys.segment_key(seg_id, "free_len"), 0, -1)]
        free = [(int(m[:16], 16), int(m[16:], 16)) for m in by_off]
        if sorted(free) != sorted((int(m[16:], 16), int(m[:16], 16)) for m in by_len):
            report.add("free_index", seg_id, "free_off and free_len members differ")
        allocs = await _records(service, report, seg_id, info, buckets)
        pending = {off for off, rec in allocs.items() if rec.ms is not None}
        counted = (int(info.get("allocations", "0")), int(info.get("pending", "0")))
        if counted != (len(allocs), len(pending)):
            report.add(
                "allocation_count",
                seg_id,
                f"info counts {counted[0]} records, {counted[1]} pending; found {len(allocs)}, "
                f"{len(pending)}",
            )
        extents: list[tuple[int, int, str]] = []
        for off, length in free:
            extents.append((off, length, "free"))
        for off, rec in allocs.items():
            extents.append((off, rec.length, "alloc " + rec.owner))
        extents.sort()
        pos = 0
        for off, length, what in extents:
            if off < pos:
                report.add(
                    "alloc_overlap", seg_id, f"{what} at {off} overlaps the extent ending at {pos}"
                )
            if length <= 0:
                report.add("alloc_overlap", seg_id, f"{what} at {off} has length {length}")
            pos = max(pos, off + length)
        covered = sum(length for _, length, _ in extents)
        if pos > size or (info.get("mounted") == "1" and covered != size):
            report.add(
                "alloc_coverage", seg_id, f"extents cover {covered} of {size} bytes, end {pos}"
            )
        adj = [e for e in extents if e[2] == "free"]
        for a, b in itertools.pairwise(adj):
            if a[0] + a[1] == b[0]:
                report.add("free_not_coalesced", seg_id, f"free extents at {a[0]} and {b[0]} touch")
        total = sum(rec.length for rec in allocs.values())
        if total != from_u64hex(info.get("allocated", "0")):
            report.add(
                "allocated_bytes",
                seg_id,
                f"allocated={info.get('allocated')} but records sum {total}",
            )
        if info.get("mounted") == "1":
            capacity += size
            allocated_total += total
        segs[seg_id] = {"info": info, "allocs": allocs, "pending": pending}
    # Objects and scheduled frees, shard by shard.
    referenced: set[tuple[str, int, str]] = set()
    objects = 0
    stored: set[str] = set()
    report.cache["objects"] = stored
    found = await shard_ids(service.backend, keys, "obj")
    for shard in range(keys.num_shards):
        for e in await client.lrange(keys.shard_key(shard, "outbox"), 0, -1):
            referenced.add(parse_entry(_s(e)))
        for e in await client.zrange(keys.shard_key(shard, "discarded"), 0, -1):
            referenced.add(parse_entry(_s(e)))
        table = segment_table(await client.hgetall(keys.shard_key(shard, "segs")))
        cids_key = keys.shard_key(shard, "cids")
        cids, bad = client_table(await client.hgetall(cids_key))
        for problem in bad:
            report.add("client_table", cids_key, problem)
        for key in found.get(shard, []):
            raw = await client.hgetall(keys.obj(shard, key))
            obj = object_fields(raw)
            if not obj:
                continue  # erased since the SCAN walk saw it
            objects += 1
            stored.add(key)
            if service.shard_of_key(key) != shard:
                report.add("object_shard", key, f"object in shard {shard}, expected another")
            try:
                reps = replica_records(obj.get("r", ""), table)
            except ValueError as e:
                report.add("replica_record", key, str(e))
                continue
            if not reps:
                report.add("object_without_replica", key, "object has no replica")
            ref = obj.get("c")
            # (read again on a miss: a client new to the shard may have put since the table read)
            if ref not in cids and not (ref and await client.hexists(cids_key, ref)):
                # put_end and put_revoke could never match its client
                report.add("object_client_unknown", key, f"c={ref!r}: no such client ref")
            for r in reps:
                seg, off = str(r["seg"]), int(r["off"], 16)
                referenced.add((seg, off, obj[PUT_ID]))
                s = segs.get(seg)
                if s is None or s["info"].get("mounted") != "1":
                    report.add(
                        "replica_unmounted", key, f"replica on segment {seg} that is not mounted"
                    )
                    continue
                rec = s["allocs"].get(off)
                if rec is None or rec.put_id != obj[PUT_ID] or rec.length != int(r["len"], 16):
                    report.add(
                        "replica_unallocated", key, f"replica {seg}@{off} has no matching record"
                    )
            if obj.get(RADIX) in ("1", "2"):
                pfx = object_prefix(key, obj)
                if not await client.hexists(keys.node(shard, pfx), node_key_field(pfx, key)):
                    report.add(
                        "object_not_registered", key, f"{RADIX} set but the key is not in its node"
                    )
                extras = sorted(f for f in ("sp", "hp", "pfx", "pl") if f in obj)
                if obj[RADIX] == "1" and extras:  # a hot read (store_grant_read) skips them
                    report.add("object_extras_unmarked", key, f"{RADIX}=1 with {', '.join(extras)}")
            elif service.config.enable_radix_tree is False and obj.get(RADIX):
                report.add("object_not_registered", key, "radix state with the flag off")
    for seg_id, s in segs.items():
        for off, rec in s["allocs"].items():
            if (seg_id, off, rec.put_id) not in referenced and off not in s["pending"]:
                report.add(
                    "alloc_leak", seg_id, f"record at {off} (owner {rec.owner!r}) is not referenced"
                )
    report.counts.update(
        objects=objects,
        segments=len(segs),
        capacity_bytes=capacity,
        allocated_bytes=allocated_total,
    )


async def _bucket_keys(service: MasterService) -> dict[str, set[str]]:
    """Every record bucket key of the namespace (one SCAN), as segment id -> buckets."""
    head = "{" + service.keys.ns + ":s:"
    out: dict[str, set[str]] = {}
    for key in await scan_match(service.backend, service.keys.alloc_bucket_pattern()):
        end = key.find("}")
        if key.startswith(head) and key.startswith(SEGMENT_SUFFIXES["alloc"], end + 1):
            seg = key[len(head) : end]
            out.setdefault(seg, set()).add(key[end + 1 + len(SEGMENT_SUFFIXES["alloc"]) :])
    return out


async def _records(
    service: MasterService,
    report: FsckReport,
    seg_id: str,
    info: dict[str, str],
    buckets: dict[str, set[str]],
) -> dict[int, AllocRecord]:
    """A segment's allocation records from its record buckets (alloc.lua), checking the bucket
    index: every bucket key is indexed (SCAN of the segment's tag), every indexed bucket holds
    records of its offset range, and a bucket with pending records is due no later than its
    oldest (its score is a lower bound)."""
    client = service.backend.client
    keys = service.keys
    out: dict[int, AllocRecord] = {}
    index = {
        _s(m): float(score)
        for m, score in await client.zrange(
            keys.segment_key(seg_id, "alloc_index"), 0, -1, withscores=True
        )
    }
    found = buckets.get(seg_id, set())
    shift = info.get(HASH_FIELDS["info"]["bucket_shift"])
    if not shift:
        if found or index:
            report.add("alloc_index", seg_id, "record buckets without a bucket shift (ak)")
        return out
    ak = int(shift)
    index_key = keys.segment_key(seg_id, "alloc_index")
    for b in sorted(found | set(index)):
        recs = bucket_records(b, ak, await client.hgetall(keys.alloc_bucket(seg_id, b)))
        # Read again before reporting: a free or a reserve may have run since the SCAN.
        if recs and b not in index and await client.zscore(index_key, b) is None:
            report.add("alloc_index", seg_id, f"record bucket {b} is not in the bucket index")
        if b in index and not recs and await client.zscore(index_key, b) is not None:
            report.add("alloc_index", seg_id, f"indexed record bucket {b} holds no record")
        for off, rec in recs.items():
            if off >> ak != int(b, 16):
                report.add("alloc_index", seg_id, f"record at {off} in bucket {b}")
            if rec.ms is not None and b in index and index[b] > rec.ms:
                report.add(
                    "alloc_index",
                    seg_id,
                    f"bucket {b} due at {index[b]:.0f}, after its pending record at {off}",
                )
        out.update(recs)
    return out
