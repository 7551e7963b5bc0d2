"""The eviction-policy study: every leaf policy on every workload, in seconds.

``python -m mooncake_redis.replay.study [--policies lru,...] [--workloads ...] [--seeds 0,1]``

``simulate`` is the replay driver's calling pattern (one exists call per 128 keys over the
request's blocks, the prefix hit, puts of the missing blocks in batches of 128 keys with their
parents, reads of the hit blocks) straight on block ids into the reference model
(``LeafCache``), without key strings or the async driver; a test holds it equal to the driver
on the model target. Leases are off: the result does not depend on the replay's speed.

Workloads: the shared conversation trace at 5,000, 10,000 and 20,000 blocks (MLA) and at
10,000 (MHA, TP 4: 8 objects per block, so 16 blocks per call), and each synthetic shape at
three capacities calibrated once so that ``lru`` reaches about a quarter, a half and three
quarters of the shape's infinite-cache hit rate (the pressure 5,000, 10,000 and 20,000 put on
the trace).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mooncake_redis.replay.leafcache import LeafCache
from mooncake_redis.replay.policies import make_policy
from mooncake_redis.replay.synth_shapes import synthesize
from mooncake_redis.replay.trace import TraceRecord, load_trace

TRACE = Path("/work/shared/traces/conversation_trace.jsonl")

# shape -> capacities (blocks) at which lru reaches ~1/4, 1/2 and 3/4 of the shape's
# infinite-cache hit rate, seed 0, scale 1 (bisection on lru; see docs/eviction.md).
SHAPE_CAPACITIES: dict[str, tuple[int, ...]] = {
    "multi-turn": (711, 3783, 6567),
    "multi-turn-tail": (741, 3920, 6731),
    "agent": (180, 969, 2093),
    "toolagent": (65, 155, 320),
    "mixed": (295, 2396, 5303),
    "scan": (1265, 8074, 13990),
}
TRACE_CONFIGS: tuple[tuple[int, int], ...] = ((5_000, 1), (10_000, 1), (20_000, 1), (10_000, 8))
"""(capacity blocks, objects per block) on the conversation trace."""


@dataclass
class SimResult:
    references: int = 0
    hits: int = 0
    evicted_blocks: int = 0
    evictions: int = 0
    refused: int = 0
    """blocks whose put was refused (no room, or the put guard: its parent was evicted)"""
    samples: int = 0
    orphans_max: int = 0
    """stored blocks whose parent block is not stored (the model stores whole blocks, so
    there are no incomplete blocks to count)"""
    stored_mean: float = 0.0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.references if self.references else 0.0


def _orphans(cache: LeafCache[int]) -> int:
    return sum(
        1 for n in cache.nodes.values() if n.parent is not None and n.parent.block not in cache
    )


def simulate(
    records: Sequence[TraceRecord],
    scoring: str,
    capacity_blocks: int,
    *,
    objects_per_block: int = 1,
    batch_size: int = 128,
    sample_every: int = 100,
) -> SimResult:
    """One replay of ``records`` on the model with the named leaf policy (leases off)."""
    cache: LeafCache[int] = LeafCache(capacity_blocks * objects_per_block, make_policy(scoring))
    per_call = max(1, batch_size // objects_per_block)
    res = SimResult()
    stored = 0
    ts0 = records[0].timestamp_ms if records else 0
    for i, rec in enumerate(records):
        cache.now_ms = float(rec.timestamp_ms - ts0)  # the driver's clock when unpaced
        ids = rec.hash_ids
        res.references += len(ids)
        hit, counting = 0, True
        for j in range(0, len(ids), per_call):
            cache.tick()
            for b in ids[j : j + per_call]:
                found = cache.touch(b, objects_per_block)
                if counting and found:
                    hit += 1
                else:
                    counting = False
        res.hits += hit
        items = [
            (b, ids[k - 1] if k else None, objects_per_block) for k, b in enumerate(ids) if k >= hit
        ]
        for j in range(0, len(items), per_call):
            cache.tick()
            cache.put(items[j : j + per_call])
        for j in range(0, hit, per_call):
            cache.tick()
            for b in ids[j : min(hit, j + per_call)]:
                cache.touch(b, objects_per_block)
        if sample_every > 0 and ((i + 1) % sample_every == 0 or i + 1 == len(records)):
            res.samples += 1
            res.orphans_max = max(res.orphans_max, _orphans(cache))
            stored += len(cache.nodes)
    res.evicted_blocks = cache.c.evicted_blocks
    res.refused = cache.c.refused_no_room + cache.c.refused_orphan
    res.evictions = cache.c.evictions
    res.stored_mean = stored / res.samples if res.samples else 0.0
    return res


@dataclass(frozen=True)
class Workload:
    name: str
    """trace name or shape, and seed"""
    capacity_blocks: int
    objects_per_block: int = 1

    @property
    def label(self) -> str:
        keys = "" if self.objects_per_block == 1 else f" mha{self.objects_per_block}"
        return f"{self.name}@{self.capacity_blocks}{keys}"


def workloads(names: Sequence[str], seeds: Sequence[int]) -> list[tuple[Workload, str, int]]:
    """(workload, shape or 'conversation', seed) for the named workloads."""
    out: list[tuple[Workload, str, int]] = []
    for name in names:
        if name == "conversation":
            for cap, per in TRACE_CONFIGS:
                out.append((Workload("conversation", cap, per), name, 0))
            continue
        caps = SHAPE_CAPACITIES.get(name)
        if caps is None:
            raise ValueError(f"unknown workload {name!r}; expected conversation or a shape")
        for seed in seeds:
            for cap in caps:
                out.append((Workload(f"{name}/s{seed}", cap), name, seed))
    return out


def _records(shape: str, seed: int, trace: Path) -> list[TraceRecord]:
    return load_trace(trace) if shape == "conversation" else synthesize(shape, seed)


def run_study(
    policies: Sequence[str], names: Sequence[str], seeds: Sequence[int], trace: Path = TRACE
) -> dict[str, dict[str, SimResult]]:
    """{workload label: {policy: result}}; progress on stderr."""
    table: dict[str, dict[str, SimResult]] = {}
    cache: dict[tuple[str, int], list[TraceRecord]] = {}
    for w, shape, seed in workloads(names, seeds):
        recs = cache.get((shape, seed))
        if recs is None:
            recs = cache[(shape, seed)] = _records(shape, seed, trace)
        row = table.setdefault(w.label, {})
        for p in policies:
            t0 = time.perf_counter()
            r = simulate(recs, p, w.capacity_blocks, objects_per_block=w.objects_per_block)
            row[p] = r
            print(
                f"{w.label:28s} {p:24s} {r.hit_rate * 100:7.3f} %  orphans {r.orphans_max}"
                f"  refused {r.refused}"
                f"  {time.perf_counter() - t0:5.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return table


def summary(
    table: dict[str, dict[str, SimResult]], baseline: str = "lru"
) -> dict[str, dict[str, float]]:
    """Per policy: min and geometric mean of hit rate / baseline's over the workloads."""
    out: dict[str, dict[str, float]] = {}
    policies = next(iter(table.values())).keys() if table else []
    for p in policies:
        ratios = [
            row[p].hit_rate / row[baseline].hit_rate
            for row in table.values()
            if baseline in row and row[baseline].hit_rate > 0
        ]
        if ratios:
            out[p] = {
                "min": min(ratios),
                "gmean": math.exp(sum(math.log(r) for r in ratios) / len(ratios)),
                "wins": float(sum(r > 1.0 for r in ratios)),
                "losses": float(sum(r < 1.0 for r in ratios)),
            }
    return out


def _print(table: dict[str, dict[str, SimResult]], baseline: str) -> None:
    policies = list(next(iter(table.values())).keys()) if table else []
    width = max([len(p) for p in policies] + [8])
    print(f"{'workload':28s} " + " ".join(f"{p:>{width}s}" for p in policies))
    for label, row in table.items():
        cells = [f"{row[p].hit_rate * 100:{width}.2f}" for p in policies]
        print(f"{label:28s} " + " ".join(cells))
    for key in ("min", "gmean"):
        s = summary(table, baseline)
        cells = [f"{s.get(p, {}).get(key, 0.0):{width}.4f}" for p in policies]
        print(f"{key + ' vs ' + baseline:28s} " + " ".join(cells))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mooncake_redis.replay.study", description=__doc__)
    ap.add_argument("--policies", default="lru,lru-refs", help="comma-separated scoring specs")
    ap.add_argument(
        "--workloads",
        default="conversation," + ",".join(SHAPE_CAPACITIES),
        help="comma-separated: conversation and/or synthetic shapes",
    )
    ap.add_argument("--seeds", default="0", help="seeds of the synthetic shapes (e.g. 0,1,2)")
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--baseline", default="lru")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    if args.baseline not in policies:
        policies.insert(0, args.baseline)
    table = run_study(
        policies,
        [w for w in args.workloads.split(",") if w],
        [int(s) for s in args.seeds.split(",") if s],
        Path(args.trace),
    )
    if args.json:
        data = {
            "table": {
                w: {p: asdict(r) | {"hit_rate": r.hit_rate} for p, r in row.items()}
                for w, row in table.items()
            },
            "summary": summary(table, args.baseline),
        }
        print(json.dumps(data, indent=1, sort_keys=True))
    else:
        _print(table, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
