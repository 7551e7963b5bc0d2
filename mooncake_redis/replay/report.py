"""Presenting replays: a side-by-side rich table, JSON, and a hit-rate/orphan plot.

Runs are columns so that our store and the real Mooncake master (or two policies) read across
one row per figure, which is how the comparisons in the design notes are made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
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
    table = Table(title=escape(title))
    table.add_column("", no_wrap=True)
    tiered = any(r.host_hits for r in results)
    per_run = [dict(_rows(r, tiered)) for r in results]
    names: list[str] = []
    for r in results:
        for name, _ in _rows(r, tiered):
            if name not in names:
                names.append(name)
    for r in results:
        table.add_column(escape(r.label), justify="right")
    for name in names:
        table.add_row(escape(name), *(escape(d.get(name, "-")) for d in per_run))
    return table


def summary_table(results: Sequence[ReplayResult], title: str = "replay") -> Table:
    """One row per run with the figures that decide a comparison; fits 80 columns (the full
    table, :func:`results_table`, has every figure)."""
    tiered = any(r.host_hits for r in results)
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), show_edge=False)
    heads = ["capacity\n(blocks)", "policy", "prefix\nhit %"]
    heads += ["store\nhit %"] if tiered else []
    heads += ["orphans %\nmean / max", "puts\nrefused", "evicted\nobjects", "time"]
    for head in heads:
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    for r in results:
        h = r.health
        row = [
            str(r.params.get("capacity_blocks", "-")),
            escape(str(r.params.get("policy", r.target))),
            f"{r.hit_rate * 100:.2f}",
        ]
        row += [f"{r.store_hit_rate * 100:.2f}"] if tiered else []
        row += [
            f"{h.get('orphan_share_mean', 0) * 100:.1f} / {h.get('orphan_share_max', 0) * 100:.1f}",
            _int(r.puts_failed),
            _int(r.evicted_keys),
            f"{r.elapsed_s:.0f} s",
        ]
        table.add_row(*row)
    return table


def print_summary(
    results: Sequence[ReplayResult], title: str = "replay", console: Console | None = None
) -> None:
    (console or Console()).print(summary_table(results, title))


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
    title: str | None = None,
) -> Path:
    """PNG of hit rate and mean orphan share against capacity, one line per series (policy).

    The hit-rate axis spans at least 20 points so that a 1-point gap looks like one; each point
    carries its value, and the x ticks are the capacities that ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = series or (lambda r: str(r.params.get("policy", r.target)))
    cap = capacity or (lambda r: r.params.get("capacity_blocks", 0))
    groups: dict[str, list[ReplayResult]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    fig, (ax_hit, ax_orph) = plt.subplots(1, 2, figsize=(11, 4.8 if title else 4.2))
    hits_all: list[float] = []
    orph_all: list[float] = []
    for i, (name, runs) in enumerate(groups.items()):
        runs = sorted(runs, key=cap)
        xs = [cap(r) for r in runs]
        hits = [r.hit_rate * 100 for r in runs]
        orph = [r.health.get("orphan_share_mean", 0) * 100 for r in runs]
        hits_all += hits
        orph_all += orph
        ax_hit.plot(xs, hits, marker="o", label=name)
        ax_orph.plot(xs, orph, marker="o", label=name)
        above = i % 2 == 0  # labels of alternate series above and below their points
        for x, y in zip(xs, hits):
            ax_hit.annotate(f"{y:.1f}", (x, y), textcoords="offset points",
                            xytext=(0, 6 if above else -13), ha="center", fontsize=8)  # fmt: skip
    ax_hit.set_ylim(*_span(hits_all, minimum=20.0, floor=0.0, ceiling=100.0))
    top = max(5.0, max(orph_all, default=0.0) * 1.15)
    ax_orph.set_ylim(-top * 0.04, top)  # a line at 0 stays visible above the axis
    ticks = sorted({cap(r) for r in results})
    ax_hit.set(xlabel="capacity (blocks)", ylabel="prefix-hit rate (%)", title="hit rate")
    ax_orph.set(
        xlabel="capacity (blocks)", ylabel="orphaned objects (% of stored, mean)", title="orphans"
    )
    for ax in (ax_hit, ax_orph):
        ax.set_xticks(ticks)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _span(
    values: Sequence[float], minimum: float, floor: float, ceiling: float
) -> tuple[float, float]:
    """Axis limits around ``values`` at least ``minimum`` wide, within [floor, ceiling]."""
    if not values:
        return floor, ceiling
    lo, hi = min(values), max(values)
    pad = max(0.0, minimum - (hi - lo)) / 2 + (hi - lo) * 0.1
    lo, hi = max(floor, lo - pad), min(ceiling, hi + pad)
    if hi - lo < minimum:  # pushed against a bound: widen on the other side
        lo, hi = (floor, floor + minimum) if lo == floor else (ceiling - minimum, ceiling)
    return lo, hi
