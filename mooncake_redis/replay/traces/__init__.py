"""Trace slices shipped with the package, replayable by short name (``--trace NAME``)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def bundled() -> dict[str, Path]:
    """Short name -> path of every bundled trace."""
    return {p.stem: p for p in sorted(HERE.glob("*.jsonl"))}


def resolve(name: str) -> Path:
    """A file path as given, or a bundled trace's short name when no such file exists."""
    path = Path(name)
    if not path.exists() and name in bundled():
        return bundled()[name]
    return path
