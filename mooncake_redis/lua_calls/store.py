"""Wrappers of the object-store scripts on the shard tags (batched per node by the context).

Erasing scripts (``remove``, ``put_revoke``, ``segment_drop``, ``janitor_shard``) reply the
cross-shard continuations and the buffer frees along with their per-item results: the caller
runs the unlinks and applies the frees (:meth:`~mooncake_redis.puts.Puts.finish_erase`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from ..context import Context, ShardItem
from ..errors import MooncakeError
from ..models import COMPLETE, ReplicaDescriptor
from ..records import FreePair, _s
from ..types import replica_descriptor
from .radix import RawContinuation


class Result(NamedTuple):
    """A per-item {code, message}; code 0 is success."""

    code: int
    message: str

    def error(self) -> MooncakeError | None:
        return None if self.code == 0 else MooncakeError(self.code, self.message)


class Erased(NamedTuple):
    results: list[Result]  # one per item, in items order
    continuations: list[RawContinuation]
    frees: list[FreePair]


class ReplicaList(NamedTuple):
    code: int
    message: str
    replicas: list[ReplicaDescriptor]  # the COMPLETE replicas


# A segment-table entry (raw cjson, store.lua) -> (segment id, base, endpoint, protocol, name).
# Keyed by the entry's own bytes, so a cached value is always that entry's.
_SEGMENTS: dict[bytes, tuple[str, int, str, str, str]] = {}
_SEGMENTS_MAX = 4096


def _segment(raw: bytes) -> tuple[str, int, str, str, str]:
    got = _SEGMENTS.get(raw)
    if got is None:
        seg, base, ep, proto, name = (str(x) for x in orjson.loads(raw))
        got = (seg, int(base, 16), ep, proto, name)
        if len(_SEGMENTS) >= _SEGMENTS_MAX:
            _SEGMENTS.clear()
        _SEGMENTS[raw] = got
    return got


def complete_replicas(record: Any, refs: Sequence[Any]) -> list[ReplicaDescriptor]:
    """The COMPLETE replicas of a replica record (field ``r``: ``id,st,ref,off,len`` joined by
    ``;``, off and len hex), with ``refs`` the flat ref, segment-table entry pairs it names."""
    rec = record.decode() if type(record) is bytes else str(record)
    # One segment (the common case: every replica of the object in one segment): no table.
    only: bytes = refs[1] if len(refs) == 2 else b""
    table = None if only else {_s(refs[i]): refs[i + 1] for i in range(0, len(refs), 2)}
    out: list[ReplicaDescriptor] = []
    for part in rec.split(";") if rec else ():
        rid, st, ref, off, length = part.split(",")
        if st != "C":
            continue
        seg, base, ep, proto, name = _segment(table[ref] if table is not None else only)
        offset = int(off, 16)
        out.append(
            replica_descriptor(
                int(rid), COMPLETE, seg, name, base + offset, int(length, 16), proto, ep, offset
            )
        )
    return out


class Reclaimed(NamedTuple):
    """What a batch of janitor or drop steps did, with the unlinks and frees to finish."""

    first: int  # discarded puts (janitor_shard) / replicas dropped (segment_drop)
    second: int  # released buffers / objects erased
    continuations: list[RawContinuation]
    frees: list[FreePair]


def _frees(raw: Sequence[Any]) -> list[FreePair]:
    return [(int(sh), _s(e)) for sh, e in raw]


def _key_items(ctx: Context, keys: Sequence[str], *extra: Any) -> list[ShardItem]:
    shards = ctx.shards_of_keys(keys)
    if not extra:
        return [(sh, (k,)) for sh, k in zip(shards, keys)]
    return [(sh, (k, *extra)) for sh, k in zip(shards, keys)]


async def get_replicas(ctx: Context, keys: Sequence[str]) -> list[ReplicaList]:
    """``get_replicas``: each key's COMPLETE replicas, granting a lease (and soft pin)."""
    c = ctx.config
    replies = await ctx.run_sharded_keys(
        "get_replicas",
        keys,
        [c.default_kv_lease_ttl_ms, c.default_kv_soft_pin_ttl_ms, 1 if c.enable_radix_tree else 0],
    )
    out: list[ReplicaList] = []
    for r in replies:
        if r[0] == 0:
            out.append(ReplicaList(0, "", complete_replicas(r[2], r[4:])))
        else:
            out.append(ReplicaList(int(r[0]), _s(r[1]), []))
    return out


async def exist(ctx: Context, keys: Sequence[str]) -> list[bool]:
    """``exist``: True only with a COMPLETE replica; a hit grants a lease."""
    c = ctx.config
    replies = await ctx.run_sharded_keys(
        "exist",
        keys,
        [c.default_kv_lease_ttl_ms, c.default_kv_soft_pin_ttl_ms, 1 if c.enable_radix_tree else 0],
    )
    return [r == 1 for r in replies]


async def objects_complete(ctx: Context) -> dict[str, str]:
    """``objects_complete``: key -> put id of every COMPLETE object, one call (one SCAN walk)
    per node."""
    out: dict[str, str] = {}
    for flat in await _complete(ctx, 1):
        dec = _decoder(flat)
        out.update(zip(map(dec, flat[::2]), map(dec, flat[1::2])))
    return out


async def complete_keys(ctx: Context) -> set[str]:
    """``objects_complete`` without put ids: the key of every COMPLETE object (one status read
    per object, half the reply of :func:`objects_complete`)."""
    out: set[str] = set()
    for flat in await _complete(ctx, 0):
        out.update(map(_decoder(flat), flat))
    return out


async def _complete(ctx: Context, with_ids: int) -> list[list[Any]]:
    head = [ctx.keys.scan_pattern("obj"), with_ids]
    replies = await ctx.run_every_shard("objects_complete", head)
    return [flat for _, reply in replies for flat in reply]


def _decoder(flat: list[Any]) -> Callable[[Any], str]:
    # Bulk strings come back as bytes: decoded by map, not a call per value (the replay's
    # health samples read every object).
    return bytes.decode if flat and type(flat[0]) is bytes else _s


OK = Result(0, "")


async def put_end(ctx: Context, keys: Sequence[str], client_id: str) -> list[Result]:
    """``put_end``: each key's PROCESSING replicas become COMPLETE (ARGV per key: key, client
    id; the groups built per batch by ``run_sharded_keys``)."""
    replies = await ctx.run_sharded_keys("put_end", keys, (), client_id)
    # Integer replies arrive as ints: a success is 0 (one shared Result), a failure {code, msg}.
    return [OK if r == 0 else Result(int(r[0]), _s(r[1])) for r in replies]


async def _erase(
    ctx: Context, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
) -> Erased:
    results: list[Result] = [Result(0, "")] * len(items)
    conts: list[RawContinuation] = []
    frees: list[FreePair] = []
    for idx, (replies, cs, fs) in await ctx.run_sharded(script, items, head):
        for i, r in zip(idx, replies):
            results[i] = Result(int(r[0]), _s(r[1]))
        conts.extend(cs)
        frees.extend(_frees(fs))
    return Erased(results, conts, frees)


async def put_revoke(ctx: Context, keys: Sequence[str], client_id: str) -> Erased:
    """``put_revoke``: erases each key's PROCESSING put of ``client_id``."""
    return await _erase(ctx, "put_revoke", _key_items(ctx, keys, client_id))


async def remove(ctx: Context, keys: Sequence[str], *, skip: bool, force: bool) -> Erased:
    """``remove``: ``skip`` passes over leased or incomplete objects (the regex and remove-all
    RPCs) instead of answering their error; ``force`` ignores leases."""
    head = ["skip" if skip else "strict", 1 if force else 0]
    return await _erase(ctx, "remove", _key_items(ctx, keys), head)


async def outbox_peek(ctx: Context) -> list[FreePair]:
    """``outbox_peek``: up to a batch of pending frees of every shard's outbox."""
    frees: list[FreePair] = []
    for idx, reply in await ctx.run_every_shard("outbox_peek", [ctx.config.script_batch_size]):
        for shard, entries in zip(idx, reply):
            frees.extend((shard, _s(e)) for e in entries)
    return frees


async def outbox_ack(ctx: Context, frees: Sequence[FreePair]) -> None:
    """``outbox_ack``: drops applied frees from their shards' outboxes."""
    await ctx.run_sharded("outbox_ack", [(sh, [e]) for sh, e in frees])


async def outbox_apply(
    ctx: Context, by_segment: dict[str, list[tuple[str, str]]], frees: Sequence[FreePair]
) -> None:
    """``outbox_apply`` (a single Redis): ``alloc_free`` of ``by_segment`` (offset u64 hex, put
    id) and ``outbox_ack`` of ``frees`` in one atomic call."""
    keys = ctx.keys
    seg_anchors = [keys.segment_anchor(seg) for seg in by_segment]
    argv: list[Any] = [len(by_segment)]
    for anchor, pairs in zip(seg_anchors, by_segment.values()):
        argv += (anchor, len(pairs))
        argv += [x for pair in pairs for x in pair]
    by_shard: dict[int, list[str]] = {}
    for shard, entry in frees:
        by_shard.setdefault(shard, []).append(entry)
    shard_anchors = [keys.anchor(shard) for shard in by_shard]
    argv.append(len(by_shard))
    for anchor, (shard, entries) in zip(shard_anchors, by_shard.items()):
        argv += (anchor, shard, len(entries), *entries)
    await ctx.backend.call("outbox_apply", [*seg_anchors, *shard_anchors], argv)


async def janitor_shard(ctx: Context) -> tuple[Reclaimed, bool]:
    """``janitor_shard`` on every shard: discards stale puts, releases due buffers. Also
    whether a shard hit the per-call limit (call again)."""
    c = ctx.config
    limit = c.script_batch_size
    total = Reclaimed(0, 0, [], [])
    more = False
    for _, (d, r, cs, fs) in await ctx.run_every_shard(
        "janitor_shard", [c.put_start_discard_timeout_ms, c.put_start_release_timeout_ms, limit]
    ):
        more = more or int(d) >= limit or int(r) >= limit
        total.continuations.extend(cs)
        total.frees.extend(_frees(fs))
        total = total._replace(first=total.first + int(d), second=total.second + int(r))
    return total, more


class AllocRef(NamedTuple):
    """An allocation record's owner object and the buffer it names."""

    key: str
    segment_id: str
    offset: str  # u64 hex
    put_id: str


async def owner_check(ctx: Context, refs: Sequence[AllocRef]) -> list[bool]:
    """``owner_check``: whether each buffer is referenced by its owner (or its free is due)."""
    replies = await ctx.run_sharded_items(
        "owner_check", [(ctx.shard_of_key(r.key), list(r)) for r in refs]
    )
    return [bool(int(x)) for x in replies]


async def segment_drop(ctx: Context, refs: Sequence[AllocRef]) -> Reclaimed:
    """``segment_drop``: drops the replicas an unmounting segment's records name."""
    total = Reclaimed(0, 0, [], [])
    for _, (dropped, erased, cs, fs) in await ctx.run_sharded(
        "segment_drop", [(ctx.shard_of_key(r.key), list(r)) for r in refs]
    ):
        total.continuations.extend(cs)
        total.frees.extend(_frees(fs))
        total = total._replace(first=total.first + int(dropped), second=total.second + int(erased))
    return total
