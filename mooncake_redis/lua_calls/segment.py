"""Wrappers of the scripts on one segment's tag ``{<ns>:s:<segment id>}``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..context import Context
from ..models import SegmentStats
from ..records import _s, alloc_owner, from_u64hex, parse_alloc_record, u64hex


class MountReply(NamedTuple):
    code: int
    message: str
    owner: str  # the client id of the mounted segment (another one: mounted earlier by it)


class UnmountBegin(NamedTuple):
    state: int  # 0 unknown segment, 1 unmounting, 2 refused (another client's segment)
    owner: str


UNKNOWN, UNMOUNTING, REFUSED = 0, 1, 2


async def segment_mount(
    ctx: Context,
    segment_id: str,
    *,
    name: str,
    base: int,
    size: int,
    te_endpoint: str,
    protocol: str,
    client_id: str,
) -> MountReply:
    """``segment_mount``: creates the allocator (idempotent)."""
    code, msg, owner = await ctx.backend.call(
        "segment_mount",
        [ctx.keys.segment_anchor(segment_id)],
        [name, u64hex(base), u64hex(size), te_endpoint, protocol, client_id],
    )
    return MountReply(int(code), _s(msg), _s(owner))


async def segment_unmount_begin(
    ctx: Context, segment_id: str, client_id: str, check_owner: bool
) -> UnmountBegin:
    """``segment_unmount_begin``: the segment stops allocating."""
    state, owner = await ctx.backend.call(
        "segment_unmount_begin",
        [ctx.keys.segment_anchor(segment_id)],
        [client_id, 1 if check_owner else 0],
    )
    return UnmountBegin(int(state), _s(owner))


async def segment_unmount_end(ctx: Context, segment_id: str) -> bool:
    """``segment_unmount_end``: deletes the allocator of an unmounting segment: its record
    buckets a few per call (about ``script_batch_size`` records), then the rest. Checkpoint
    ``unmount:buckets`` between calls."""
    while True:
        done = int(
            await ctx.backend.call(
                "segment_unmount_end",
                [ctx.keys.segment_anchor(segment_id)],
                [max(1, ctx.config.script_batch_size // 64)],
            )
        )
        if done != 2:
            return bool(done)
        await ctx.checkpoint("unmount:buckets")


# A NamedTuple's own __new__ is Python code; tuple.__new__ builds the same instance in C (the
# hot paths build one per key).
_new = tuple.__new__


class ReserveAsk(NamedTuple):
    """One put's request to ``alloc_reserve``."""

    key: str
    put_id: str
    size: int
    replicas: int  # buffers still wanted, on distinct segments
    start: int  # 0-based candidate index to start the rotation at
    preferred: list[int]  # 1-based candidate indices tried first


class Grant(NamedTuple):
    segment_id: str
    offset: str  # u64 hex
    base: str  # u64 hex
    te_endpoint: str
    protocol: str
    name: str


class Reserved(NamedTuple):
    now_ms: int
    grants: list[list[Grant]]  # per ask
    max_size: int  # the largest mounted candidate segment


async def alloc_reserve(
    ctx: Context, node: Any, seg_ids: Sequence[str], asks: Sequence[ReserveAsk]
) -> Reserved:
    """``alloc_reserve`` over candidate segments that one Redis node serves."""
    anchors = [ctx.keys.segment_anchor(s) for s in seg_ids]
    argv: list[Any] = [len(anchors), *anchors, len(asks)]
    sizes: dict[int, str] = {}  # u64 hex per distinct size
    for a in asks:
        size = sizes.get(a.size)
        if size is None:
            size = sizes[a.size] = u64hex(a.size)
        if a.preferred:
            argv.extend((alloc_owner(a.key), a.put_id, size, a.replicas, a.start, len(a.preferred)))
            argv.extend(a.preferred)
        else:
            argv.extend((alloc_owner(a.key), a.put_id, size, a.replicas, a.start, 0))
    declared = anchors[:1] if ctx.backend.cluster else anchors
    now, flat, maxsize, segs = await ctx.backend.call("alloc_reserve", declared, argv, node)
    # A grant is only ever on a mounted candidate, whose details are there. Per item, flat:
    # 2g, then g (anchor index, offset) pairs; the common reply (one grant) without a loop.
    details = [(_s(d[0]), _s(d[1]), _s(d[2]), _s(d[3])) if d else ("", "", "", "") for d in segs]
    grants: list[list[Grant]] = []
    i = 0
    for _ in asks:
        ng = flat[i]
        if ng == 2:
            k = flat[i + 1] - 1
            grants.append([_new(Grant, (seg_ids[k], _s(flat[i + 2]), *details[k]))])
        else:
            grants.append(
                [
                    Grant(seg_ids[flat[j] - 1], _s(flat[j + 1]), *details[flat[j] - 1])
                    for j in range(i + 1, i + 1 + ng, 2)
                ]
            )
        i += 1 + ng
    return Reserved(int(now), grants, from_u64hex(maxsize))


async def alloc_free(ctx: Context, by_segment: Mapping[str, Sequence[tuple[str, str]]]) -> None:
    """``alloc_free``: frees (offset u64 hex, put id) buffers; a put id that no longer owns the
    offset is left alone (idempotent)."""
    await _pairs(ctx, "alloc_free", by_segment)


async def alloc_confirm(ctx: Context, by_segment: Mapping[str, Sequence[tuple[str, str]]]) -> None:
    """``alloc_confirm``: pending allocations referenced by their owners stop being pending."""
    await _pairs(ctx, "alloc_confirm", by_segment)


async def _pairs(
    ctx: Context, script: str, by_segment: Mapping[str, Sequence[tuple[str, str]]]
) -> None:
    groups = [(seg, [x for pair in pairs for x in pair]) for seg, pairs in by_segment.items()]
    await ctx.run_segment_groups(script, groups, arity=2)


class PendingAlloc(NamedTuple):
    segment_id: str
    offset: str  # u64 hex
    put_id: str
    ms: int
    owner: str  # the object key


async def alloc_pending(ctx: Context, seg_ids: Sequence[str], cutoff_ms: int) -> list[PendingAlloc]:
    """``alloc_pending``: allocations made at or before ``cutoff_ms`` and not yet confirmed."""
    out = []
    for part, reply in await ctx.run_segment_groups(
        "alloc_pending", [(s, []) for s in seg_ids], [cutoff_ms, ctx.config.script_batch_size]
    ):
        for j, row in zip(part, reply):
            for k in range(0, len(row), 3):
                rec = parse_alloc_record(row[k + 1], row[k + 2])
                out.append(PendingAlloc(seg_ids[j], _s(row[k]), rec.put_id, rec.ms or 0, rec.owner))
    return out


async def segment_info(ctx: Context, seg_ids: Sequence[str]) -> list[SegmentStats | None]:
    """``segment_info``: each segment's record (None: unknown), in ``seg_ids`` order."""
    out: list[SegmentStats | None] = [None] * len(seg_ids)
    for part, reply in await ctx.run_segment_groups("segment_info", [(s, []) for s in seg_ids]):
        for j, row in zip(part, reply):
            out[j] = segment_stats(seg_ids[j], row)
    return out


class Pending(NamedTuple):
    """What eviction left pending, counted over every shard (``evict_pending``, or the used
    ratio's read on a single Redis)."""

    unlinks: int  # journaled unlink steps not yet run
    outbox: int  # frees waiting in the outboxes
    orphans: int  # orphan roots


class SegmentUsage(NamedTuple):
    ids: list[str]  # the registered segment ids, sorted
    stats: list[SegmentStats | None]  # each one's record (None: unknown), in ``ids`` order
    pending: Pending | None  # None: not read (more shards than one call covers)


async def segment_usage(ctx: Context) -> SegmentUsage:
    """``segment_usage`` (a single Redis): the registered segments' records and what eviction
    left pending in every shard, in one call."""
    n = ctx.keys.num_shards
    shards = n if n <= ctx.config.script_batch_size else 0
    ids, rows, counts = await ctx.backend.call(
        "segment_usage", [ctx.keys.global_key("segments")], [ctx.keys.anchor(0), shards]
    )
    pairs = sorted(zip(map(_s, ids), rows))
    pending = Pending(*map(int, counts)) if counts else None
    return SegmentUsage([i for i, _ in pairs], [segment_stats(i, row) for i, row in pairs], pending)


def segment_stats(seg_id: str, row: Sequence[Any]) -> SegmentStats | None:
    """A segment_info row (alloc.lua segment_info_row) as stats; None for an unknown one."""
    if not row:
        return None
    f = [None if x is None else _s(x) for x in row]
    return SegmentStats(
        id=seg_id,
        name=f[0] or "",
        client_id=f[5] or "",
        size=from_u64hex(f[2] or "0"),
        allocated=from_u64hex(f[6] or "0"),
        mounted=f[7] == "1",
        allocations=int(f[8] or 0),
        pending=int(f[9] or 0),
    )
