"""The object store: segments and their allocators, objects, leases, clients, the janitor.

Three kinds of hash tag take part, so every operation is a sequence of single-tag script steps
ordered so that a crash between two steps leaves only a state something reclaims:

- put_start: reserve buffers in the segment tags (owner-tagged with key and put id, recorded as
  pending with Redis time) concurrently with the radix parent link, then commit the object in its
  shard. A crash in between leaves pending allocations: the janitor frees those whose owner never
  committed them (after ``alloc_reclaim_grace_ms``; the commit refuses allocations older than
  ``alloc_commit_deadline_ms``, which is shorter, so a slow commit never attaches a freed buffer).
- erase paths (revoke, remove, stale-put discard, unmount): one shard script deletes the object,
  unregisters it from the radix index (continuations come back for the parent shards) and pushes
  its buffer frees to the shard outbox; the caller then applies the frees to the allocators
  (``alloc_free``: idempotent, put-id checked) and acknowledges them (``outbox_ack``). A crash
  leaves entries in the outbox, which the janitor drains.
- unmount: the segment stops allocating (``mounted=0``), the replicas its allocation records
  name are dropped in their shards (a reservation not yet committed is vetoed instead), then the
  allocator and the registry entry go. Resumable: the janitor finishes unmounts left half done.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorCode, MooncakeError
from .models import (
    COMPLETE,
    PROCESSING,
    GetReplicaListResponse,
    PingResponse,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
    SegmentStats,
    check_segment,
)
from .prefix import check_key, check_str
from .radix import RadixMixin
from .service_base import ShardItem

ConfigArg = ReplicateConfig | Mapping[str, Any] | None
FreePair = tuple[int, str]  # (shard, outbox entry "segment id|offset|put id")
SEGMENT_CACHE_S = 0.5  # how long a worker trusts its copy of the segment registry
MAX_REGEX_LEN = 1024
REGEX_TIMEOUT_S = 0.05  # per key; a pattern that needs more is refused before anything changes


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _err(reply: Sequence[Any]) -> MooncakeError | None:
    code = int(reply[0])
    return None if code == 0 else MooncakeError(code, _s(reply[1]))


def parse_entry(entry: str) -> tuple[str, int, str]:
    """``"segment id|offset|put id"`` (the segment id may contain ``|``)."""
    rest, pid = entry.rsplit("|", 1)
    seg, off = rest.rsplit("|", 1)
    return seg, int(off), pid


def parse_alloc_record(rec: str) -> tuple[int, str, int, str]:
    """``"len|put id|ms|owner key"`` -> (len, put id, ms, owner)."""
    length, pid, ms, owner = rec.split("|", 3)
    return int(length), pid, int(ms), owner


@dataclass
class _Put:
    index: int
    key: str
    size: int
    prefix: str
    shard: int
    pid: str
    cfg: ReplicateConfig
    reps: list[dict[str, Any]] = field(default_factory=list)
    gen: int = 0
    maxsize: int = 0  # largest mounted segment seen while reserving
    adopted: bool = False  # failed, but its node already names the parent: keep the edge
    parent_stored: bool = False  # the parent block was completely stored when linked


@dataclass
class JanitorReport:
    ran: bool = True
    expired_clients: int = 0
    unmounted_segments: int = 0
    discarded_puts: int = 0
    released_buffers: int = 0
    confirmed_allocations: int = 0
    reclaimed_allocations: int = 0
    drained_frees: int = 0


class StoreMixin(RadixMixin):
    _seg_cache: list[str] | None = None
    _seg_cache_at: float = 0.0

    # ------------------------------------------------------------------ plumbing
    async def _run_erase(
        self, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
    ) -> list[Any]:
        """Scripts replying {per item, conts, frees}: finishes unlinks and drains the frees."""
        out: list[Any] = [None] * len(items)
        conts: list[Any] = []
        frees: list[FreePair] = []
        for idx, (replies, cs, fs) in await self.run_sharded(script, items, head):
            for i, r in zip(idx, replies):
                out[i] = r
            conts.extend(cs)
            frees.extend((int(sh), _s(e)) for sh, e in fs)
        await self.checkpoint("erase:erased")
        await self.finish_unlinks(conts)
        await self.apply_frees(frees)
        return out

    async def _segment_groups(
        self, script: str, groups: Sequence[tuple[str, Sequence[Any]]], head: Sequence[Any] = ()
    ) -> list[Any]:
        """One call per node over segment groups (segment id, n items flattened);
        returns the replies of the calls (not per group)."""
        if not groups:
            return []
        anchors = [self.keys.segment_anchor(seg) for seg, _ in groups]
        limit = self.config.script_batch_size

        async def run(node: Any, idx: list[int]) -> list[Any]:
            replies: list[Any] = []
            for start in range(0, len(idx), limit):
                part = idx[start : start + limit]
                keys = [anchors[j] for j in part]
                argv: list[Any] = [*head, len(part)]
                for j in part:
                    data = groups[j][1]
                    argv.extend((anchors[j], len(data) // max(1, _arity(script)), *data))
                declared = keys[:1] if self.backend.cluster else keys
                replies.append((part, await self.backend.call(script, declared, argv, node)))
            return replies

        out: list[Any] = []
        for _, calls in await self.backend.per_node(anchors, run):
            out.extend(calls)
        return out

    # ------------------------------------------------------------------ segments
    async def _segment_ids(self, refresh: bool = False) -> list[str]:
        now = time.monotonic()
        if refresh or self._seg_cache is None or now - self._seg_cache_at > SEGMENT_CACHE_S:
            raw = await self.backend.client.hkeys(self.keys.global_key("segments"))
            self._seg_cache = sorted(_s(x) for x in raw)
            self._seg_cache_at = now
        return list(self._seg_cache)

    def _segments_changed(self) -> None:
        self._seg_cache = None

    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        """MountSegment: idempotent (an already mounted segment is left as it is)."""
        seg = check_segment(segment)
        anchor = self.keys.segment_anchor(seg.id)  # validates the id
        client = check_str("client_id", client_id, self.config.max_key_length)
        g = self.keys.global_key
        await self.backend.call("segment_register", [g("segments"), g("clients")], [seg.id, client])
        await self.checkpoint("mount:registered")
        code, msg, owner = await self.backend.call(
            "segment_mount",
            [anchor],
            [seg.name, str(seg.base), seg.size, seg.te_endpoint, seg.protocol, client],
        )
        self._segments_changed()
        if int(code) != 0:
            raise MooncakeError(int(code), f"segment {seg.id}: {_s(msg)}")
        if _s(owner) != client:  # mounted earlier by another client: keep its registry entry
            await self.backend.client.hset(g("segments"), seg.id, _s(owner))

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        """ReMountSegment: mounts each (idempotently), e.g. after Ping said NEED_REMOUNT."""
        checked = [check_segment(s) for s in segments]
        await asyncio.gather(*(self.mount_segment(s, client_id) for s in checked))

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        """UnmountSegment: drops every replica on the segment (objects left without a replica are
        erased and unregistered). An unknown segment is OK."""
        anchor = self.keys.segment_anchor(segment_id)
        found, owner = await self.backend.call("segment_unmount_begin", [anchor], [])
        self._segments_changed()
        if int(found) == 0:
            await self.backend.call(
                "segment_deregister", [self.keys.global_key("segments")], [segment_id, ""]
            )
            return
        await self.checkpoint("unmount:begun")
        await self._finish_unmount(segment_id, _s(owner))

    async def _finish_unmount(self, segment_id: str, owner: str) -> None:
        alloc_key = self.keys.segment_key(segment_id, "alloc")
        cursor: Any = 0
        while True:
            cursor, data = await self.backend.client.hscan(
                alloc_key, cursor, count=self.config.script_batch_size
            )
            items: list[ShardItem] = []
            for off, rec in data.items():
                _, pid, _, key = parse_alloc_record(_s(rec))
                items.append((self.shard_of_key(key), [key, segment_id, int(_s(off)), pid]))
            conts: list[Any] = []
            frees: list[FreePair] = []
            for _, (_d, _e, cs, fs) in await self.run_sharded("segment_drop", items):
                conts.extend(cs)
                frees.extend((int(sh), _s(e)) for sh, e in fs)
            await self.finish_unlinks(conts)
            await self.apply_frees(frees)
            if int(cursor) == 0:
                break
        await self.checkpoint("unmount:dropped")
        await self.backend.call("segment_unmount_end", [self.keys.segment_anchor(segment_id)], [])
        await self.backend.call(
            "segment_deregister", [self.keys.global_key("segments")], [segment_id, owner]
        )
        self._segments_changed()

    async def segment_stats(self, segment_ids: Sequence[str] | None = None) -> list[SegmentStats]:
        """Per registered segment: size, allocated bytes (cheap to sum for the used ratio)."""
        ids = list(segment_ids) if segment_ids is not None else await self._segment_ids(True)
        out: dict[str, SegmentStats] = {}
        for part, reply in await self._segment_groups("segment_info", [(s, []) for s in ids]):
            for j, row in zip(part, reply):
                if not row:
                    continue
                f = [None if x is None else _s(x) for x in row]
                out[ids[j]] = SegmentStats(
                    id=ids[j],
                    name=f[0] or "",
                    client_id=f[5] or "",
                    size=int(f[2] or 0),
                    allocated=int(f[6] or 0),
                    mounted=f[7] == "1",
                    allocations=int(f[8] or 0),
                    pending=int(f[9] or 0),
                )
        return [out[s] for s in ids if s in out]

    async def used_ratio(self) -> float:
        stats = [s for s in await self.segment_stats() if s.mounted]
        cap = sum(s.size for s in stats)
        return sum(s.allocated for s in stats) / cap if cap else 0.0

    # ------------------------------------------------------------------ clients
    async def ping(self, client_id: str) -> PingResponse:
        client = check_str("client_id", client_id, self.config.max_key_length)
        g = self.keys.global_key
        view, status = await self.backend.call(
            "client_ping", [g("clients"), g("meta")], [client, self.config.client_live_ttl_ms]
        )
        return PingResponse(int(_s(view)), _s(status))

    # ------------------------------------------------------------------ put
    def _check_put(self, i: int, key: Any, lengths: Any, cfg: ReplicateConfig) -> _Put:
        k = check_key(key, self.config.max_key_length)
        if isinstance(lengths, int) and not isinstance(lengths, bool):
            lengths = [lengths]
        if not isinstance(lengths, (list, tuple)) or not lengths:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"slice_lengths[{i}]: a non-empty list")
        for n in lengths:
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise MooncakeError(
                    ErrorCode.INVALID_PARAMS,
                    f"slice_lengths[{i}]: sizes must be positive, got {n!r}",
                )
        prefix = self.prefix_of(k)
        if cfg.parent_block_hash == prefix:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"parent_block_hash: {prefix} is the key's own prefix"
            )
        return _Put(i, k, sum(lengths), prefix, self.keys.shard_of(prefix), uuid.uuid4().hex, cfg)

    def _check_config(self, cfg: ReplicateConfig) -> ReplicateConfig:
        n = cfg.replica_num
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 64:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"replica_num: must be in 1..64, got {n!r}"
            )
        for s in cfg.preferred():
            check_str("preferred_segments", s, 256)
        check_str(
            "parent_block_hash", cfg.parent_block_hash, self.config.max_key_length, allow_empty=True
        )
        return cfg

    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        [res] = await self.batch_put_start(client_id, [key], [slice_lengths], config)
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        """BatchPutStart: one result per key. ``config`` is one ReplicateConfig for all keys (as
        Mooncake) or a list with one per key (so one batch can carry several radix parents)."""
        client = check_str("client_id", client_id, self.config.max_key_length)
        if not isinstance(keys, (list, tuple)) or len(keys) != len(slice_lengths):
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, "keys, slice_lengths: lists of the same length"
            )
        if isinstance(config, (list, tuple)):
            if len(config) != len(keys):
                raise MooncakeError(ErrorCode.INVALID_PARAMS, "config: one per key")
            cfgs = [self._check_config(ReplicateConfig.coerce(c)) for c in config]
        else:
            one = self._check_config(ReplicateConfig.coerce(config))  # type: ignore[arg-type]
            cfgs = [one] * len(keys)
        results: list[list[ReplicaDescriptor] | MooncakeError | None] = [None] * len(keys)
        puts: list[_Put] = []
        for i, key in enumerate(keys):
            try:
                puts.append(self._check_put(i, key, slice_lengths[i], cfgs[i]))
            except MooncakeError as exc:
                results[i] = exc
        radix = self.config.enable_radix_tree
        linked = [p for p in puts if radix and p.cfg.parent_block_hash]
        # Step 1: reserve buffers (segment tags) and link radix parents (parent shards).
        _, links = await asyncio.gather(
            self._reserve(puts),
            self.link_parents([(p.cfg.parent_block_hash, p.prefix) for p in linked]),
        )
        for p, (gen, stored) in zip(linked, links):
            p.gen, p.parent_stored = gen, stored
        await self.checkpoint("put_start:reserved")
        failed: list[_Put] = []
        empty = [p for p in puts if not p.reps]
        guard = radix and self.config.radix_put_guard
        orphans = self._orphan_puts(puts, linked) if guard else []
        if empty or orphans:
            await self._explain_no_replica(empty, results, orphans)
            failed.extend(empty)
            failed.extend(orphans)
        # Step 2: commit in the object shards.
        todo = [p for p in puts if p.reps and p not in orphans]
        c = self.config
        head = [
            c.num_shards,
            c.alloc_commit_deadline_ms,
            c.put_start_discard_timeout_ms,
            c.put_start_release_timeout_ms,
            c.default_kv_soft_pin_ttl_ms,
            1 if radix else 0,
        ]
        items: list[ShardItem] = []
        for p in todo:
            parent = p.cfg.parent_block_hash if radix else ""
            items.append(
                (
                    p.shard,
                    [
                        p.key,
                        p.pid,
                        client,
                        p.size,
                        1 if p.cfg.with_soft_pin else 0,
                        1 if p.cfg.with_hard_pin else 0,
                        json.dumps(p.reps, separators=(",", ":")),
                        p.prefix,
                        parent,
                        self.keys.shard_of(parent) if parent else -1,
                        p.gen,
                    ],
                )
            )
        conts: list[Any] = []
        replies: list[Any] = [None] * len(items)
        for idx, (rs, cs) in await self.run_sharded("put_start", items, head):
            for i, r in zip(idx, rs):
                replies[i] = r
            conts.extend(cs)
        for p, reply in zip(todo, replies):
            err = _err(reply)
            if err is not None:
                results[p.index] = err
                p.adopted = bool(int(reply[3]))
                failed.append(p)
                continue
            ids = [int(x) for x in reply[2]]
            results[p.index] = [
                ReplicaDescriptor(
                    replica_id=rid,
                    status=PROCESSING,
                    segment_id=r["seg"],
                    segment_name=r["name"],
                    buffer_address=int(r["base"]) + int(r["off"]),
                    size=int(r["len"]),
                    protocol=r["proto"],
                    transport_endpoint=r["ep"],
                    offset=int(r["off"]),
                )
                for rid, r in zip(ids, p.reps)
            ]
        # Failed items: free their buffers, drop the parent edges made for them.
        undo = [
            (
                p.cfg.parent_block_hash,
                self.keys.shard_of(p.cfg.parent_block_hash),
                p.prefix,
                str(p.gen),
            )
            for p in failed
            if p.gen and not p.adopted
        ]
        await asyncio.gather(
            self._free_reservations([p for p in failed if p.reps]),
            self.finish_unlinks([*conts, *undo]),
        )
        if guard:
            await self._roll_back_partial(client, puts, failed, results)
        return [r if r is not None else MooncakeError(ErrorCode.INTERNAL_ERROR) for r in results]

    @staticmethod
    def _orphan_puts(puts: Sequence[_Put], linked: Sequence[_Put]) -> list[_Put]:
        """Puts whose parent block is neither completely stored nor part of this batch."""
        in_batch = {p.prefix for p in puts}
        return [
            p for p in linked if not p.parent_stored and p.cfg.parent_block_hash not in in_batch
        ]

    async def _roll_back_partial(
        self,
        client: str,
        puts: Sequence[_Put],
        failed: Sequence[_Put],
        results: list[Any],
    ) -> None:
        """Revokes what this batch committed for a block that it did not accept whole, and for
        children of such blocks that had no other stored parent, until nothing changes."""
        bad = {
            p.prefix
            for p in failed
            if not (
                isinstance(results[p.index], MooncakeError)
                and results[p.index].code == ErrorCode.OBJECT_ALREADY_EXISTS
            )
        }
        done = [p for p in puts if not isinstance(results[p.index], MooncakeError)]
        while True:
            undo = [
                p
                for p in done
                if p.prefix in bad or (p.cfg.parent_block_hash in bad and not p.parent_stored)
            ]
            if not undo:
                return
            await self.batch_put_revoke(client, [p.key for p in undo])
            for p in undo:
                results[p.index] = MooncakeError(
                    ErrorCode.NO_AVAILABLE_HANDLE,
                    f"key {p.key}: rolled back, its block or its parent block was not stored whole",
                )
                bad.add(p.prefix)
            done = [p for p in done if p not in undo]

    async def _reserve(self, puts: Sequence[_Put], retried: bool = False) -> None:
        """Allocates up to replica_num buffers per put, on distinct segments."""
        if not puts:
            return
        seg_ids = await self._segment_ids()
        if seg_ids:
            anchors = [self.keys.segment_anchor(s) for s in seg_ids]
            groups = self.backend.group(anchors)
            node_of_seg: dict[str, int] = {}
            for gi, (_, idx) in enumerate(groups):
                for j in idx:
                    node_of_seg[seg_ids[j]] = gi
            # Per put: its node order (preferred segments' nodes first, then a random rotation).
            plans: list[list[int]] = []
            for p in puts:
                order: list[int] = []
                for s in p.cfg.preferred():
                    gi = node_of_seg.get(s, -1)
                    if gi >= 0 and gi not in order:
                        order.append(gi)
                start = random.randrange(len(groups))
                for k in range(len(groups)):
                    gi = (start + k) % len(groups)
                    if gi not in order:
                        order.append(gi)
                plans.append(order)
            step = 0
            while True:
                calls: dict[int, list[int]] = {}
                for n, p in enumerate(puts):
                    if len(p.reps) < p.cfg.replica_num and step < len(plans[n]):
                        calls.setdefault(plans[n][step], []).append(n)
                if not calls:
                    break
                await asyncio.gather(
                    *(
                        self._reserve_on(
                            groups[gi][0],
                            [seg_ids[j] for j in groups[gi][1]],
                            [puts[n] for n in ns],
                        )
                        for gi, ns in calls.items()
                    )
                )
                step += 1
        if (
            not retried
            and any(not p.reps for p in puts)
            and (time.monotonic() - self._seg_cache_at > 0.05)
        ):
            # Maybe this worker's copy of the registry is stale: look again once.
            self._segments_changed()
            await self._reserve([p for p in puts if not p.reps], retried=True)

    async def _reserve_on(self, node: Any, seg_ids: list[str], puts: list[_Put]) -> None:
        anchors = [self.keys.segment_anchor(s) for s in seg_ids]
        pos = {s: i + 1 for i, s in enumerate(seg_ids)}
        for start in range(0, len(puts), self.config.script_batch_size):
            part = puts[start : start + self.config.script_batch_size]
            argv: list[Any] = [len(anchors), *anchors, len(part)]
            for p in part:
                pref = [pos[s] for s in p.cfg.preferred() if s in pos]
                argv.extend(
                    (
                        p.key,
                        p.pid,
                        p.size,
                        p.cfg.replica_num - len(p.reps),
                        random.randrange(len(anchors)),
                        len(pref),
                        *pref,
                    )
                )
            declared = anchors[:1] if self.backend.cluster else anchors
            now, per_item, maxsize = await self.backend.call("alloc_reserve", declared, argv, node)
            for p, got in zip(part, per_item):
                for kidx, off, base, ep, proto, name in got:
                    p.reps.append(
                        {
                            "seg": seg_ids[int(kidx) - 1],
                            "off": int(off),
                            "len": p.size,
                            "base": _s(base),
                            "ep": _s(ep),
                            "proto": _s(proto),
                            "name": _s(name),
                            "ms": int(now),
                        }
                    )
                p.maxsize = max(int(maxsize), p.maxsize)

    async def _explain_no_replica(
        self, puts: list[_Put], results: list[Any], orphans: Sequence[_Put] = ()
    ) -> None:
        """Puts that got no buffer: OBJECT_ALREADY_EXISTS if the key exists (Mooncake checks that
        first), INVALID_PARAMS if no segment could ever hold it, else NO_AVAILABLE_HANDLE with a
        durable eviction request. Orphan puts (refused by the radix put guard): OBJECT_NOT_FOUND
        naming the parent block, unless the key exists."""
        radix = self.config.enable_radix_tree
        every = [*puts, *orphans]
        replies = await self.run_sharded_items(
            "put_precheck",
            [
                (p.shard, [p.key, p.prefix, p.cfg.parent_block_hash if radix else "", p.gen])
                for p in every
            ],
            [self.config.put_start_discard_timeout_ms],
        )
        need_evict = False
        for n, (p, (hit, adopted)) in enumerate(zip(every, replies)):
            p.adopted = bool(int(adopted))
            maxsize = p.maxsize
            if n >= len(puts) and not int(hit):
                results[p.index] = MooncakeError(
                    ErrorCode.OBJECT_NOT_FOUND,
                    f"config.parent_block_hash: block {p.cfg.parent_block_hash} is not stored;"
                    " refusing an orphan (radix_put_guard)",
                )
            elif int(hit):
                results[p.index] = MooncakeError(
                    ErrorCode.OBJECT_ALREADY_EXISTS, f"key {p.key}: object already exists"
                )
            elif maxsize and p.size > maxsize:
                results[p.index] = MooncakeError(
                    ErrorCode.INVALID_PARAMS,
                    f"slice_lengths: {p.size} bytes exceed every mounted segment ({maxsize})",
                )
            else:
                need_evict = True
                results[p.index] = MooncakeError(
                    ErrorCode.NO_AVAILABLE_HANDLE,
                    f"key {p.key}: no segment has {p.size} bytes free",
                )
        if need_evict:
            now = await self.backend.time_ms()
            await self.backend.client.set(self.keys.global_key("evict_needed"), now)

    async def _free_reservations(self, puts: Sequence[_Put]) -> None:
        by_seg: dict[str, list[Any]] = {}
        for p in puts:
            for r in p.reps:
                by_seg.setdefault(r["seg"], []).extend((r["off"], p.pid))
        await self._segment_groups("alloc_free", list(by_seg.items()))

    async def apply_frees(self, frees: Sequence[FreePair]) -> int:
        """Applies outbox entries to the allocators, then acknowledges them. Idempotent."""
        if not frees:
            return 0
        by_seg: dict[str, list[Any]] = {}
        for _, entry in frees:
            seg, off, pid = parse_entry(entry)
            by_seg.setdefault(seg, []).extend((off, pid))
        valid = []
        for seg, data in by_seg.items():
            try:
                self.keys.segment_anchor(seg)
            except MooncakeError:
                continue
            valid.append((seg, data))
        await self._segment_groups("alloc_free", valid)
        await self.checkpoint("drain:freed")
        await self.run_sharded("outbox_ack", [(sh, [e]) for sh, e in frees])
        return len(frees)

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        [res] = await self.batch_put_end(client_id, [key], replica_type)
        if res is not None:
            raise res

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self._client_step("put_end", client_id, keys, replica_type)

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        [res] = await self.batch_put_revoke(client_id, [key], replica_type)
        if res is not None:
            raise res

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self._client_step("put_revoke", client_id, keys, replica_type)

    async def _client_step(
        self, script: str, client_id: str, keys: Sequence[str], replica_type: str
    ) -> list[MooncakeError | None]:
        client = check_str("client_id", client_id, self.config.max_key_length)
        if replica_type not in ("MEMORY", "memory"):
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"replica_type: only MEMORY, got {replica_type!r}"
            )
        results: list[MooncakeError | None] = [None] * len(keys)
        items: list[ShardItem] = []
        where: list[int] = []
        for i, key in enumerate(keys):
            try:
                k = check_key(key, self.config.max_key_length)
            except MooncakeError as exc:
                results[i] = exc
                continue
            items.append((self.shard_of_key(k), [k, client]))
            where.append(i)
        if script == "put_end":
            replies = await self.run_sharded_items(script, items)
        else:
            replies = await self._run_erase(script, items)
        for i, r in zip(where, replies):
            results[i] = _err(r)
        return results

    # ------------------------------------------------------------------ reads
    def _checked_keys(self, keys: Sequence[str]) -> tuple[list[Any], list[ShardItem], list[int]]:
        results: list[Any] = [None] * len(keys)
        items: list[ShardItem] = []
        where: list[int] = []
        for i, key in enumerate(keys):
            try:
                k = check_key(key, self.config.max_key_length)
            except MooncakeError as exc:
                results[i] = exc
                continue
            items.append((self.shard_of_key(k), [k]))
            where.append(i)
        return results, items, where

    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        [res] = await self.batch_get_replica_list([key])
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        """GetReplicaList per key: the COMPLETE replicas, granting a lease."""
        results, items, where = self._checked_keys(keys)
        ttl = self.config.default_kv_lease_ttl_ms
        replies = await self.run_sharded_items(
            "get_replicas", items, [ttl, self.config.default_kv_soft_pin_ttl_ms]
        )
        for i, r in zip(where, replies):
            err = _err(r)
            if err is not None:
                results[i] = err
                continue
            reps = [x for x in json.loads(_s(r[2])) if x.get("st") == "C"]
            results[i] = GetReplicaListResponse(
                [
                    ReplicaDescriptor(
                        replica_id=int(x["id"]),
                        status=COMPLETE,
                        segment_id=str(x["seg"]),
                        segment_name=str(x.get("name", "")),
                        buffer_address=int(x["base"]) + int(x["off"]),
                        size=int(x["len"]),
                        protocol=str(x["proto"]),
                        transport_endpoint=str(x["ep"]),
                        offset=int(x["off"]),
                    )
                    for x in reps
                ],
                ttl,
            )
        return results

    async def exist_key(self, key: str) -> bool:
        [res] = await self.batch_exist_key([key])
        if isinstance(res, MooncakeError):
            raise res
        return res

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        """ExistKey per key: True only with a COMPLETE replica; a hit grants a lease."""
        results, items, where = self._checked_keys(keys)
        replies = await self.run_sharded_items(
            "exist",
            items,
            [self.config.default_kv_lease_ttl_ms, self.config.default_kv_soft_pin_ttl_ms],
        )
        for i, r in zip(where, replies):
            results[i] = bool(int(r))
        return results

    # ------------------------------------------------------------------ removal
    async def remove(self, key: str, force: bool = False) -> None:
        [res] = await self.batch_remove([key], force)
        if res is not None:
            raise res

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        results, items, where = self._checked_keys(keys)
        replies = await self._run_erase("remove", items, ["strict", 1 if force else 0])
        for i, r in zip(where, replies):
            results[i] = _err(r)
        return results

    async def _all_object_keys(self) -> list[str]:
        async def scan(shard: int) -> list[str]:
            out: list[str] = []
            cursor: Any = 0
            key = self.keys.shard_key(shard, "objects")
            while True:
                cursor, members = await self.backend.client.sscan(key, cursor, count=1000)
                out.extend(_s(m) for m in members)
                if int(cursor) == 0:
                    return out

        parts = await asyncio.gather(*(scan(s) for s in range(self.keys.num_shards)))
        return [k for p in parts for k in p]

    async def _remove_skip(self, keys: Sequence[str], force: bool) -> int:
        items: list[ShardItem] = [(self.shard_of_key(k), [k]) for k in keys]
        replies = await self._run_erase("remove", items, ["skip", 1 if force else 0])
        return sum(1 for r in replies if int(r[0]) == 0)

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        """RemoveByRegex: removes matching objects (search semantics, as std::regex_search),
        skipping leased (unless force) or incomplete ones; returns the count. A pattern that is
        invalid, longer than 1024 characters, or needs more than 50 ms on one key is refused
        (INVALID_PARAMS) before anything is removed."""
        check_str("pattern", pattern, MAX_REGEX_LEN)
        import regex  # type: ignore[import-untyped]  # third-party: supports a match timeout

        try:
            pat = regex.compile(pattern)
        except (regex.error, ValueError, OverflowError) as exc:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"pattern: invalid regex: {exc}") from exc
        matched: list[str] = []
        for k in await self._all_object_keys():
            try:
                if pat.search(k, timeout=REGEX_TIMEOUT_S):
                    matched.append(k)
            except TimeoutError as exc:
                raise MooncakeError(
                    ErrorCode.INVALID_PARAMS, f"pattern: takes too long on key {k[:64]!r}"
                ) from exc
        return await self._remove_skip(matched, force)

    async def remove_all(self, force: bool = False) -> int:
        """RemoveAll: removes every object that is not leased (unless force) and complete."""
        return await self._remove_skip(await self._all_object_keys(), force)

    # ------------------------------------------------------------------ janitor
    async def run_janitor_once(self, force: bool = False) -> JanitorReport:
        """Client expiry, unfinished unmounts, stale puts, pending allocations, outbox drain.
        At most once per ``janitor_interval_ms`` across all workers (SET NX PX on the global
        janitor key) unless ``force``. Every step is safe to run concurrently with itself."""
        if not force:
            ok = await self.backend.client.set(
                self.keys.global_key("janitor"),
                uuid.uuid4().hex,
                nx=True,
                px=self.config.janitor_interval_ms,
            )
            if not ok:
                return JanitorReport(ran=False)
        rep = JanitorReport()
        await self.expire_clients(rep)
        await self.resume_unmounts(rep)
        await self.discard_stale_puts(rep)
        await self.reclaim_allocations(rep)
        await self.drain_outboxes(rep)
        return rep

    async def expire_clients(self, rep: JanitorReport | None = None) -> int:
        """Unmounts the segments of clients silent longer than client_live_ttl_ms."""
        rep = rep or JanitorReport()
        g = self.keys.global_key
        now, segs, expired = await self.backend.call(
            "clients_expired",
            [g("segments"), g("clients")],
            [self.config.client_live_ttl_ms, self.config.script_batch_size],
        )
        pairs = [(_s(segs[i]), _s(segs[i + 1])) for i in range(0, len(segs), 2)]
        for seg_id, _client in pairs:
            await self.unmount_segment(seg_id)
            rep.unmounted_segments += 1
        if expired:
            cutoff = int(now) - self.config.client_live_ttl_ms
            rep.expired_clients += int(
                await self.backend.call(
                    "clients_remove", [g("clients")], [cutoff, *(_s(c) for c in expired)]
                )
            )
        return rep.unmounted_segments

    async def resume_unmounts(self, rep: JanitorReport | None = None) -> None:
        rep = rep or JanitorReport()
        for st in await self.segment_stats():
            if not st.mounted:
                await self._finish_unmount(st.id, st.client_id)
                rep.unmounted_segments += 1

    async def discard_stale_puts(self, rep: JanitorReport | None = None) -> None:
        """Discards PROCESSING puts older than the discard timeout (their buffers are released
        at put start + release timeout) and releases due discarded buffers."""
        rep = rep or JanitorReport()
        c = self.config
        limit = c.script_batch_size
        items: list[ShardItem] = [(s, []) for s in range(c.num_shards)]
        for _ in range(16):
            conts: list[Any] = []
            frees: list[FreePair] = []
            more = False
            for idx, (d, r, cs, fs) in await self.run_sharded(
                "janitor_shard",
                items,
                [c.put_start_discard_timeout_ms, c.put_start_release_timeout_ms, limit],
            ):
                rep.discarded_puts += int(d)
                rep.released_buffers += int(r)
                more = more or int(d) >= limit or int(r) >= limit
                conts.extend(cs)
                frees.extend((int(sh), _s(e)) for sh, e in fs)
                del idx
            await self.finish_unlinks(conts)
            rep.drained_frees += await self.apply_frees(frees)
            if not more:
                break

    async def reclaim_allocations(self, rep: JanitorReport | None = None) -> None:
        """Pending allocations older than the commit deadline: confirmed if their owner object
        references them (or their free is scheduled), freed past the reclaim grace otherwise."""
        rep = rep or JanitorReport()
        c = self.config
        ids = await self._segment_ids(True)
        if not ids:
            return
        now = await self.backend.time_ms()
        records: list[tuple[str, int, str, int, str]] = []  # seg, off, pid, ms, owner
        for part, reply in await self._segment_groups(
            "alloc_pending",
            [(s, []) for s in ids],
            [now - c.alloc_commit_deadline_ms, c.script_batch_size],
        ):
            for j, row in zip(part, reply):
                for k in range(0, len(row), 2):
                    _, pid, ms, owner = parse_alloc_record(_s(row[k + 1]))
                    records.append((ids[j], int(_s(row[k])), pid, ms, owner))
        if not records:
            return
        checks = await self.run_sharded_items(
            "owner_check",
            [(self.shard_of_key(o), [o, seg, off, pid]) for seg, off, pid, _, o in records],
        )
        confirm: dict[str, list[Any]] = {}
        free: dict[str, list[Any]] = {}
        for (seg, off, pid, ms, _), hit in zip(records, checks):
            if int(hit):
                confirm.setdefault(seg, []).extend((off, pid))
                rep.confirmed_allocations += 1
            elif ms <= now - c.alloc_reclaim_grace_ms:
                free.setdefault(seg, []).extend((off, pid))
                rep.reclaimed_allocations += 1
        await self._segment_groups("alloc_confirm", list(confirm.items()))
        await self._segment_groups("alloc_free", list(free.items()))

    async def drain_outboxes(self, rep: JanitorReport | None = None) -> int:
        """Applies every shard's outbox (frees left by a crash between erase and drain)."""
        rep = rep or JanitorReport()
        items: list[ShardItem] = [(s, []) for s in range(self.config.num_shards)]
        total = 0
        for _ in range(64):
            frees: list[FreePair] = []
            for idx, reply in await self.run_sharded(
                "outbox_peek", items, [self.config.script_batch_size]
            ):
                for i, entries in zip(idx, reply):
                    frees.extend((items[i][0], _s(e)) for e in entries)
            if not frees:
                break
            total += await self.apply_frees(frees)
        rep.drained_frees += total
        return total


def _arity(script: str) -> int:
    """Items per entry of segment group scripts (offset, put id pairs, or none)."""
    return {"alloc_free": 2, "alloc_confirm": 2}.get(script, 1)


# ---------------------------------------------------------------------- fsck (invariants 3, 4)
async def check_store(service: Any, report: Any, now: int) -> None:
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
    capacity = allocated_total = 0
    for seg_id in sorted(reg):
        info = {
            _s(k): _s(v) for k, v in (await client.hgetall(keys.segment_anchor(seg_id))).items()
        }
        if not info:
            report.add("segment_without_allocator", seg_id, f"registry lists {seg_id} without info")
            continue
        size = int(info["size"])
        free = await client.zrange(keys.segment_key(seg_id, "free_off"), 0, -1, withscores=True)
        flen = {
            _s(m): int(sc)
            for m, sc in await client.zrange(
                keys.segment_key(seg_id, "free_len"), 0, -1, withscores=True
            )
        }
        allocs = {
            int(_s(k)): parse_alloc_record(_s(v))
            for k, v in (await client.hgetall(keys.segment_key(seg_id, "alloc"))).items()
        }
        pending = {
            int(_s(m)) for m in await client.zrange(keys.segment_key(seg_id, "pending"), 0, -1)
        }
        extents: list[tuple[int, int, str]] = []
        if {_s(m) for m, _ in free} != set(flen):
            report.add("free_index", seg_id, "free_off and free_len members differ")
        for m, sc in free:
            extents.append((int(sc), flen.get(_s(m), 0), "free"))
        for off, (length, _pid, _ms, owner) in allocs.items():
            extents.append((off, length, "alloc " + owner))
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
        total = sum(length for length, *_ in allocs.values())
        if total != int(info.get("allocated", 0)):
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
    for shard in range(keys.num_shards):
        for e in await client.lrange(keys.shard_key(shard, "outbox"), 0, -1):
            referenced.add(parse_entry(_s(e)))
        for e in await client.zrange(keys.shard_key(shard, "discarded"), 0, -1):
            referenced.add(parse_entry(_s(e)))
        members = await client.smembers(keys.shard_key(shard, "objects"))
        for m in members:
            key = _s(m)
            objects += 1
            obj = {_s(k): _s(v) for k, v in (await client.hgetall(keys.obj(shard, key))).items()}
            if not obj:
                report.add("object_index", key, "objects set lists a key without metadata")
                continue
            if service.shard_of_key(key) != shard:
                report.add("object_shard", key, f"object in shard {shard}, expected another")
            reps = json.loads(obj["r"]) if obj.get("r") else []
            if not reps:
                report.add("object_without_replica", key, "object has no replica")
            for r in reps:
                seg, off = str(r["seg"]), int(r["off"])
                referenced.add((seg, off, obj["pid"]))
                s = segs.get(seg)
                if s is None or s["info"].get("mounted") != "1":
                    report.add(
                        "replica_unmounted", key, f"replica on segment {seg} that is not mounted"
                    )
                    continue
                rec = s["allocs"].get(off)
                if rec is None or rec[1] != obj["pid"] or rec[0] != int(r["len"]):
                    report.add(
                        "replica_unallocated", key, f"replica {seg}@{off} has no matching record"
                    )
            if obj.get("rad") == "1":
                nk = keys.node_keys(shard, obj.get("pfx", ""))
                if not await client.sismember(nk, key):
                    report.add("object_not_registered", key, "rad=1 but the key is not in its node")
            elif service.config.enable_radix_tree is False and obj.get("rad"):
                report.add("object_not_registered", key, "radix state with the flag off")
    for seg_id, s in segs.items():
        for off, (_len, pid, _ms, owner) in s["allocs"].items():
            if (seg_id, off, pid) not in referenced and off not in s["pending"]:
                report.add(
                    "alloc_leak", seg_id, f"record at {off} (owner {owner!r}) is not referenced"
                )
    report.counts.update(
        objects=objects,
        segments=len(segs),
        capacity_bytes=capacity,
        allocated_bytes=allocated_total,
    )


def _register_fsck() -> None:
    try:
        from . import fsck
    except ImportError:  # pragma: no cover
        return
    if check_store not in fsck.EXTRA_CHECKS:
        fsck.EXTRA_CHECKS.append(check_store)


_register_fsck()
