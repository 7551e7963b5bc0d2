"""Replay measurements: per-call latency percentiles and orphan/incomplete-block sampling.

Orphans (stored objects whose parent block is not completely stored) and incomplete blocks are
the invariant violations a parent-unaware store produces; they are sampled from the target's own
view of what it stores, during the run, because an end-of-run snapshot hides the transients.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from mooncake_redis.replay.trace import block_of_key


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[idx]


@dataclass
class LatencyRecorder:
    """Wall-clock latency of every target call, by call name."""

    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.samples[name].append(time.perf_counter() - t0)

    def summary(self) -> dict[str, dict[str, float]]:
        """{call: {count, p50_ms, p99_ms}}."""
        out: dict[str, dict[str, float]] = {}
        for name, values in sorted(self.samples.items()):
            s = sorted(values)
            out[name] = {
                "count": float(len(s)),
                "p50_ms": percentile(s, 50) * 1e3,
                "p99_ms": percentile(s, 99) * 1e3,
            }
        return out


@dataclass(frozen=True, slots=True)
class StoreSample:
    """Health of one snapshot of the stored keys."""

    stored: int
    orphans: int
    incomplete: int

    @property
    def orphan_share(self) -> float:
        return self.orphans / self.stored if self.stored else 0.0


def analyse(keys: Iterable[str], parents: Mapping[str, str], objects_per_block: int) -> StoreSample:
    """Count orphaned objects and incomplete blocks among the stored keys.

    parents maps block hash -> parent block hash ("" for roots); keys of unknown blocks (not
    put by this replay) are counted as stored but never judged.
    """
    per_block: Counter[str] = Counter(block_of_key(k) for k in keys)
    stored = sum(per_block.values())
    orphans = 0
    incomplete = 0
    for block, n in per_block.items():
        if n < objects_per_block:
            incomplete += 1
        parent = parents.get(block)
        if parent and per_block.get(parent, 0) < objects_per_block:
            orphans += n
    return StoreSample(stored, orphans, incomplete)


@dataclass
class SampleStats:
    """Mean and max over the samples taken during a run."""

    samples: list[StoreSample] = field(default_factory=list)

    def add(self, s: StoreSample) -> None:
        self.samples.append(s)

    def summary(self) -> dict[str, float]:
        n = len(self.samples)
        if n == 0:
            return {k: 0.0 for k in _SUMMARY_KEYS}
        shares = [s.orphan_share for s in self.samples]
        return {
            "samples": float(n),
            "orphans_mean": sum(s.orphans for s in self.samples) / n,
            "orphans_max": float(max(s.orphans for s in self.samples)),
            "orphan_share_mean": sum(shares) / n,
            "orphan_share_max": max(shares),
            "incomplete_mean": sum(s.incomplete for s in self.samples) / n,
            "incomplete_max": float(max(s.incomplete for s in self.samples)),
            "stored_mean": sum(s.stored for s in self.samples) / n,
        }


_SUMMARY_KEYS = (
    "samples",
    "orphans_mean",
    "orphans_max",
    "orphan_share_mean",
    "orphan_share_max",
    "incomplete_mean",
    "incomplete_max",
    "stored_mean",
)
