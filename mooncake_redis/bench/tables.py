"""The figures of ``mooncake-redis bench`` as rich tables, whatever the shape a section returns:
a mapping of records becomes a grid (one row per name), a list of records one row per record,
and the remaining scalars one name/value table. Numbers get as many digits as they deserve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

Scalar = (int, float, str, bool, type(None))


def fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN: nothing measured
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value)
    return escape(str(value))


def _cell(value: Any) -> bool:
    return isinstance(value, Scalar) or (
        isinstance(value, list | tuple) and all(isinstance(v, Scalar) for v in value)
    )


def _record(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(_cell(v) for v in value.values())


def _columns(records: Sequence[Mapping[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in records:
        cols += [str(k) for k in r if str(k) not in cols]
    return cols


def _grid(title: str, rows: Sequence[tuple[str | None, Mapping[str, Any]]]) -> Table:
    """One row per record; a first column of names when the records have names."""
    cols = _columns([r for _, r in rows])
    named = any(name is not None for name, _ in rows)
    t = Table(title=escape(title), title_justify="left")
    if named:
        t.add_column("")
    for c in cols:
        t.add_column(escape(c), justify="right")
    for name, r in rows:
        cells = [fmt(r[c]) if c in r else "-" for c in cols]
        t.add_row(*([escape(name or "")] if named else []), *cells)
    return t


def section_tables(name: str, value: Any) -> list[Table]:
    """The tables of one section's result."""
    scalars: dict[str, Any] = {}
    tables: list[Table] = []

    def walk(path: str, v: Any) -> None:
        if isinstance(v, list) and v and all(_record(x) for x in v):
            tables.append(_grid(path, [(None, x) for x in v]))
        elif isinstance(v, Mapping) and v and all(_record(x) for x in v.values()):
            tables.append(_grid(path, [(str(k), x) for k, x in v.items()]))
        elif isinstance(v, Mapping) and v:
            for k, x in v.items():
                walk(f"{path} {k}", x)
        else:
            scalars[path] = v

    walk(name, value)
    out = []
    if scalars:
        t = Table(title=escape(name), title_justify="left")
        t.add_column("figure")
        t.add_column("value", justify="right")
        for k, v in scalars.items():
            t.add_row(escape(k.removeprefix(name).strip() or name), fmt(v))
        out.append(t)
    return out + tables
