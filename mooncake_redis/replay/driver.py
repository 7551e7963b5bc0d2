"""The replay loop: drive a target the way SGLang HiCache drives Mooncake Store.

Per request: one batch exists over the keys of its blocks (in a tiered deployment only of the
blocks after the engine's host-cache hit), the prefix hit is the run of complete blocks from the
start, then the missing keys of every block after the hit are put (each with its parent block's
hash), then the hit blocks are read. Calls are split into batches of 128 keys like SGLang's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mooncake_redis.replay.hostcache import EngineFleet
from mooncake_redis.replay.metrics import LatencyRecorder, SampleStats, analyse
from mooncake_redis.replay.target import PutItem, ReplayTarget, VirtualClock
from mooncake_redis.replay.trace import TraceRecord, blocks_for, objects_per_block

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay; capacity and policy belong to the target (TargetOptions)."""

    key_format: str = "mla"
    tp: int = 1
    batch_size: int = 128
    engines: int = 0
    """0: engines talk to the store directly; N: N engines with host caches (tiered)."""
    host_cache_blocks: int = 0
    limit: int | None = None
    speedup: float | None = None
    """None: as fast as possible; X: follow the timestamps at X times real time."""
    sample_every: int = 100
    """Take a stored-keys sample every this many requests (and at the end)."""
    seed: int = 0
    progress: bool = True
    label: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    """Free-form description copied into the result (capacity, policy, ...) for reports."""


@dataclass
class ReplayResult:
    """Counts and measurements of one replay; hits + misses == references always."""

    label: str
    target: str
    params: dict[str, Any]
    requests: int = 0
    references: int = 0
    host_hits: int = 0
    store_hits: int = 0
    misses: int = 0
    blocks_asked: int = 0
    puts_ok: int = 0
    puts_failed: int = 0
    reads_ok: int = 0
    reads_failed: int = 0
    evictions: int = 0
    evicted_keys: int = 0
    bytes_evicted: int = 0
    removed: int = 0
    stored_final: int = 0
    elapsed_s: float = 0.0
    health: dict[str, float] = field(default_factory=dict)
    latency: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def hits(self) -> int:
        return self.host_hits + self.store_hits

    @property
    def hit_rate(self) -> float:
        """Prefix-hit rate over all block references (host cache plus store)."""
        return self.hits / self.references if self.references else 0.0

    @property
    def store_hit_rate(self) -> float:
        """Share of the blocks asked of the store that it served: what the store contributes."""
        return self.store_hits / self.blocks_asked if self.blocks_asked else 0.0

    @property
    def blocks_per_s(self) -> float:
        return self.references / self.elapsed_s if self.elapsed_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            hits=self.hits,
            hit_rate=self.hit_rate,
            store_hit_rate=self.store_hit_rate,
            blocks_per_s=self.blocks_per_s,
        )
        return d


async def _chunked(
    items: Sequence[T],
    size: int,
    call: Callable[[list[T]], Awaitable[list[R]]],
    name: str,
    lat: LatencyRecorder,
) -> list[R]:
    out: list[R] = []
    for i in range(0, len(items), size):
        with lat.time(name):
            out.extend(await call(list(items[i : i + size])))
    return out


async def replay(
    records: Sequence[TraceRecord], target: ReplayTarget, options: ReplayOptions | None = None
) -> ReplayResult:
    """Replay the records against the target and return what was measured."""
    opts = options or ReplayOptions()
    recs = records[: opts.limit] if opts.limit is not None else records
    per_block = objects_per_block(opts.key_format, opts.tp)
    fleet = (
        EngineFleet(opts.engines, opts.host_cache_blocks, opts.seed) if opts.engines > 0 else None
    )
    res = ReplayResult(opts.label or target.name, target.name, dict(opts.params))
    lat = LatencyRecorder()
    health = SampleStats()
    parents: dict[str, str] = {}
    size = target.value_size

    async def sample() -> None:
        with lat.time("stored_keys"):
            keys = await target.stored_keys()
        health.add(analyse(keys, parents, per_block))

    console = Console(stderr=True)  # stdout stays clean for --json
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("hit {task.fields[hit]:.1%}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not (opts.progress and console.is_terminal),
        transient=True,
    )
    t_start = time.perf_counter()
    ts0 = recs[0].timestamp_ms if recs else 0
    virtual = target if isinstance(target, VirtualClock) else None
    with progress:
        store = opts.params.get("store")
        where = f" on {store}" if store else ""
        task = progress.add_task(escape(f"{res.label}{where}"), total=len(recs), hit=0.0)
        for i, rec in enumerate(recs):
            if virtual is not None:
                virtual.at((rec.timestamp_ms - ts0) / (opts.speedup or 1.0))
            elif opts.speedup:
                delay = (rec.timestamp_ms - ts0) / 1e3 / opts.speedup
                delay -= time.perf_counter() - t_start
                if delay > 0:
                    await asyncio.sleep(delay)
            blocks = blocks_for(rec, opts.key_format, opts.tp)
            res.requests += 1
            res.references += len(blocks)
            host_hit = 0
            cache = None
            if fleet is not None:
                cache = fleet.caches[fleet.route()]
                host_hit = cache.match(rec.hash_ids)
            asked = blocks[host_hit:]
            res.host_hits += host_hit
            res.blocks_asked += len(asked)

            keys = [k for b in asked for k in b.keys]
            found = await _chunked(keys, opts.batch_size, target.batch_exist, "batch_exist", lat)
            hit = 0
            counting = True
            missing: list[PutItem] = []
            pos = 0
            for b in asked:
                flags = found[pos : pos + len(b.keys)]
                pos += len(b.keys)
                if counting and all(flags):
                    hit += 1
                    continue
                counting = False
                parents[b.hash] = b.parent_hash
                missing.extend(
                    PutItem(k, b.parent_hash, size)
                    for k, f in zip(b.keys, flags, strict=True)
                    if not f
                )
            res.store_hits += hit
            res.misses += len(asked) - hit

            if missing:
                ok = await _chunked(missing, opts.batch_size, target.batch_put, "batch_put", lat)
                n_ok = sum(ok)
                res.puts_ok += n_ok
                res.puts_failed += len(ok) - n_ok
            if hit:
                read_keys = [k for b in asked[:hit] for k in b.keys]
                got = await _chunked(read_keys, opts.batch_size, target.batch_get, "batch_get", lat)
                n_ok = sum(got)
                res.reads_ok += n_ok
                res.reads_failed += len(got) - n_ok
            if cache is not None:
                cache.access(rec.hash_ids)
            if opts.sample_every > 0 and (i + 1) % opts.sample_every == 0:
                await sample()
            progress.update(task, advance=1, hit=res.hit_rate)
    res.elapsed_s = time.perf_counter() - t_start
    # A store may still be evicting in the background: take the final snapshot when the
    # counters read before and after it agree, so stored == put - evicted - removed holds.
    c = await target.counters()
    for _ in range(40):
        with lat.time("stored_keys"):
            final = await target.stored_keys()
        after = await target.counters()
        if after == c:
            break
        c = after
        await asyncio.sleep(0.05)
    final_sample = analyse(final, parents, per_block)
    health.add(final_sample)
    res.stored_final = final_sample.stored
    res.evictions = c.get("evictions", 0)
    res.evicted_keys = c.get("evicted_keys", 0)
    res.bytes_evicted = c.get("bytes_evicted", 0)
    res.removed = c.get("removed", 0)
    res.health = health.summary()
    res.latency = lat.summary()
    return res
