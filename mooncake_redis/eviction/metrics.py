"""What one eviction pass did, and the cumulative counters a worker exports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

SKIP_REASONS = ("lease", "hard", "soft", "busy", "inner", "gone", "tree")


@dataclass
class EvictionResult:
    """One pass. ``mode``: "radix" (leaf-first, with the no-tree fallback), "batch"
    (Mooncake's BatchEvict) or "none" (nothing to do, or the lease is held elsewhere)."""

    mode: str = "none"
    # watermark | redis_memory | alloc_failed | forced | max_objects | orphans | idle | lease_held
    reason: str = ""
    policy: str = ""
    epoch: int = 0
    evicted_keys: list[str] = field(default_factory=list)  # object keys erased
    evicted_objects: int = 0
    evicted_leaves: int = 0
    unregistered_keys: int = 0  # registered but not stored keys dropped with their leaf
    bytes: int = 0
    fallback_objects: int = 0  # objects of no tree evicted by the BatchEvict fallback
    orphan_objects: int = 0  # objects of orphaned subtrees (evicted first)
    soft_pinned_objects: int = 0
    cascade_depth: int = 0  # radix: leaf levels reclaimed (1 = leaves only)
    rounds: int = 0  # radix: choose/evict rounds; batch: 1 or 2 passes
    batches: int = 0  # writing script calls
    candidate_reads: int = 0  # read script calls
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    used_before: float = 0.0
    used_after: float = 0.0
    seconds: float = 0.0
    round_leaves: list[list[str]] = field(default_factory=list)  # radix: leaves per round
    holder: str = ""  # the lease holder when reason == "lease_held"

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def to_dict(self, with_keys: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_keys:
            d.pop("evicted_keys")
            d.pop("round_leaves")
        return d


@dataclass
class EvictionMetrics:
    """Cumulative counters (one set per service object). Names follow Mooncake's master metrics
    where one exists: master_successful_evictions_total = successful_passes, master_attempted_
    evictions_total = passes, master_evicted_key_count = evicted_keys, master_evicted_size_bytes
    = evicted_bytes. Listeners get every pass result (a worker exports them to Prometheus)."""

    passes: int = 0
    successful_passes: int = 0
    failed_passes: int = 0
    evicted_keys: int = 0
    evicted_bytes: int = 0
    evicted_leaves: int = 0
    rounds: int = 0
    batches: int = 0
    max_cascade_depth: int = 0
    last_cascade_depth: int = 0
    pass_seconds_total: float = 0.0
    last_pass_seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    lease_acquired: int = 0
    lease_lost: int = 0
    fenced: int = 0
    janitor_runs: int = 0
    listeners: list[Callable[[EvictionResult], None]] = field(default_factory=list, repr=False)

    def record(self, r: EvictionResult) -> None:
        if r.mode == "none":
            return
        self.passes += 1
        if r.evicted_objects or r.evicted_leaves:
            self.successful_passes += 1
        else:
            self.failed_passes += 1
        self.evicted_keys += r.evicted_objects
        self.evicted_bytes += r.bytes
        self.evicted_leaves += r.evicted_leaves
        self.rounds += r.rounds
        self.batches += r.batches
        self.last_cascade_depth = r.cascade_depth
        self.max_cascade_depth = max(self.max_cascade_depth, r.cascade_depth)
        self.pass_seconds_total += r.seconds
        self.last_pass_seconds = r.seconds
        for k, v in r.skipped.items():
            self.skipped[k] = self.skipped.get(k, 0) + v
        for fn in list(self.listeners):
            fn(r)

    def add_listener(self, fn: Callable[[EvictionResult], None]) -> None:
        self.listeners.append(fn)

    def counters(self) -> dict[str, int]:
        """The replay driver's counter names."""
        return {
            "evictions": self.successful_passes,
            "evicted_keys": self.evicted_keys,
            "bytes_evicted": self.evicted_bytes,
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("listeners")
        return d
