"""Presenting replays: a side-by-side rich table, JSON, and a hit-rate/orphan plot.

Runs are columns so that our store and the real Mooncake master (or two policies) read across
one row per figure, which is how the comparisons in the design notes are made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mooncake_redis.replay.driver import ReplayResult


def _pct(x: float) -> str:
    return f"{x * 100:.2f} %"


def _int(x: float) -> str:
    return f"{x:,.0f}"


def _rows(r: ReplayResult, tiered: bool) -> list[tuple[str, str]]:
    h = r.health
    rows = [
        ("target", r.target),
        *((k, str(v)) for k, v in r.params.items()),
        ("requests", _int(r.requests)),
        ("block references", _int(r.references)),
        ("prefix-hit rate (blocks)", _pct(r.hit_rate)),
    ]
    if tiered:
        rows += [
            ("  host-cache hits", _int(r.host_hits)),
            ("  store hit rate (of asked)", _pct(r.store_hit_rate)),
        ]
    rows += [
        ("hits / misses", f"{r.hits:,} / {r.misses:,}"),
        ("puts ok / refused", f"{r.puts_ok:,} / {r.puts_failed:,}"),
        ("reads ok / failed", f"{r.reads_ok:,} / {r.reads_failed:,}"),
        ("stored objects (end)", _int(r.stored_final)),
        (
            "orphaned objects mean / max",
            f"{h.get('orphans_mean', 0):,.1f} / {h.get('orphans_max', 0):,.0f}",
        ),
        (
            "orphan share mean / max",
            f"{_pct(h.get('orphan_share_mean', 0))} / {_pct(h.get('orphan_share_max', 0))}",
        ),
        (
            "incomplete blocks mean / max",
            f"{h.get('incomplete_mean', 0):,.1f} / {h.get('incomplete_max', 0):,.0f}",
        ),
        ("health samples", _int(h.get("samples", 0))),
        ("evictions (rounds)", _int(r.evictions)),
        ("evicted objects", _int(r.evicted_keys)),
        ("bytes evicted", _int(r.bytes_evicted)),
        ("blocks / s", _int(r.blocks_per_s)),
        ("elapsed", f"{r.elapsed_s:.1f} s"),
    ]
    for call, s in r.latency.items():
        rows.append((f"{call} p50 / p99", f"{s['p50_ms']:.3f} / {s['p99_ms']:.3f} ms"))
    return rows


def results_table(results: Sequence[ReplayResult], title: str = "replay") -> Table:
    """One column per run; rows missing from a run (e.g. a call it never made) show '-'."""
    table = Table(title=title)
    table.add_column("", no_wrap=True)
    tiered = any(r.host_hits for r in results)
    per_run = [dict(_rows(r, tiered)) for r in results]
    names: list[str] = []
    for r in results:
        for name, _ in _rows(r, tiered):
            if name not in names:
                names.append(name)
    for r in results:
        table.add_column(r.label, justify="right")
    for name in names:
        table.add_row(name, *(d.get(name, "-") for d in per_run))
    return table


def print_results(
    results: Sequence[ReplayResult], title: str = "replay", console: Console | None = None
) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:  # files and pipes get the full table, unwrapped
            console = Console(width=max(100, 32 + 20 * len(results)))
    console.print(results_table(results, title))


def comparison_table(results: Sequence[ReplayResult], title: str = "replay") -> Table:
    """One row per run: the figures a policy comparison reads across."""
    table = Table(title=title)
    for name in (
        "run",
        "hit rate",
        "store hit rate",
        "orphans mean / max",
        "incomplete mean / max",
        "evictions",
        "evicted objects",
        "elapsed",
    ):
        table.add_column(name, justify="left" if name == "run" else "right", no_wrap=True)
    for r in results:
        h = r.health
        table.add_row(
            r.label,
            _pct(r.hit_rate),
            _pct(r.store_hit_rate),
            f"{h.get('orphans_mean', 0):,.1f} / {h.get('orphans_max', 0):,.0f}",
            f"{h.get('incomplete_mean', 0):,.1f} / {h.get('incomplete_max', 0):,.0f}",
            _int(r.evictions),
            _int(r.evicted_keys),
            f"{r.elapsed_s:.1f} s",
        )
    return table


def print_comparison(
    results: Sequence[ReplayResult], title: str = "replay", console: Console | None = None
) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)
    console.print(comparison_table(results, title))


def results_json(results: Sequence[ReplayResult]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=2, sort_keys=True)


def plot_capacity(
    results: Sequence[ReplayResult],
    path: str | Path,
    series: Callable[[ReplayResult], str] | None = None,
    capacity: Callable[[ReplayResult], Any] | None = None,
) -> Path:
    """PNG of hit rate and mean orphan share against capacity, one line per series (policy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = series or (lambda r: str(r.params.get("policy", r.target)))
    cap = capacity or (lambda r: r.params.get("capacity_blocks", 0))
    groups: dict[str, list[ReplayResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    fig, (ax_hit, ax_orph) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, runs in groups.items():
        runs = sorted(runs, key=cap)
        xs = [cap(r) for r in runs]
        ax_hit.plot(xs, [r.hit_rate * 100 for r in runs], marker="o", label=name)
        ax_orph.plot(
            xs,
            [r.health.get("orphan_share_mean", 0) * 100 for r in runs],
            marker="o",
            label=name,
        )
    ax_hit.set(xlabel="capacity (blocks)", ylabel="prefix-hit rate (%)", title="hit rate")
    ax_orph.set(
        xlabel="capacity (blocks)", ylabel="orphaned objects (% of stored, mean)", title="orphans"
    )
    for ax in (ax_hit, ax_orph):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
