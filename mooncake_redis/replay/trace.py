"""Mooncake FAST'25 trace records, block hashes and store key formats.

The trace names blocks by small integers; stores see 64-hex hashes and, per key format, one
(MLA) or 2*TP (MHA) objects per block, so both are derived here once for every consumer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from blake3 import blake3

KEY_FORMATS = ("mla", "mha")


class TraceError(ValueError):
    """A malformed trace line; the message names the file and the 1-based line number."""


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request: arrival time (ms from the start) and its prompt as a chain of block ids."""

    timestamp_ms: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Block:
    """One 512-token block as a store sees it: its hash, its parent's hash ("" for a root)."""

    hash: str
    parent_hash: str
    keys: tuple[str, ...]


@lru_cache(maxsize=1 << 20)
def block_hash(block_id: int) -> str:
    """64-hex blake3 of the decimal id: full 256-bit hashes, as the project keeps end to end."""
    return blake3(str(block_id).encode()).hexdigest()


def keys_for(hash_: str, key_format: str = "mla", tp: int = 1) -> tuple[str, ...]:
    """Store keys of one block: MLA one object, MHA a K and a V object per TP rank."""
    if key_format == "mla":
        return (hash_,)
    if key_format == "mha":
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        return tuple(f"{hash_}_{r}_{kv}" for r in range(tp) for kv in ("k", "v"))
    raise ValueError(f"unknown key format {key_format!r}; expected one of {KEY_FORMATS}")


def objects_per_block(key_format: str, tp: int = 1) -> int:
    """How many stored objects make one complete block."""
    return 1 if key_format == "mla" else 2 * tp


def block_of_key(key: str) -> str:
    """The block hash a key belongs to: keys always start with the 64-hex hash."""
    return key[:64]


def blocks_for(record: TraceRecord, key_format: str = "mla", tp: int = 1) -> list[Block]:
    """The request's chain as Blocks; block i's parent is block i-1, the first is a root."""
    out: list[Block] = []
    parent = ""
    for block_id in record.hash_ids:
        h = block_hash(block_id)
        out.append(Block(h, parent, keys_for(h, key_format, tp)))
        parent = h
    return out


def parse_line(line: str, lineno: int, source: str = "<trace>") -> TraceRecord:
    """Parse one JSONL line; every failure names where it happened so a bad trace is fixable."""
    where = f"{source}:{lineno}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
        raise TraceError(f"{where}: 'timestamp' must be a non-negative number, got {ts!r}")
    ids = obj.get("hash_ids")
    if not isinstance(ids, list) or not ids:
        raise TraceError(f"{where}: 'hash_ids' must be a non-empty list, got {ids!r}")
    for i, v in enumerate(ids):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TraceError(f"{where}: hash_ids[{i}] must be a non-negative integer, got {v!r}")
    return TraceRecord(int(ts), tuple(ids))


def parse_lines(lines: Iterable[str], source: str = "<trace>") -> Iterator[TraceRecord]:
    """Parse JSONL text, skipping blank lines but keeping their numbers for error messages."""
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_line(line, lineno, source)


def load_trace(path: str | Path, limit: int | None = None) -> list[TraceRecord]:
    """Read a trace file, at most `limit` requests."""
    p = Path(path)
    out: list[TraceRecord] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if limit is not None and len(out) >= limit:
                break
            if line.strip():
                out.append(parse_line(line, lineno, str(p)))
    return out


def dump_trace(records: Sequence[TraceRecord], path: str | Path) -> None:
    """Write records in the trace's own JSONL shape (for synthetic traces)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps({"timestamp": r.timestamp_ms, "hash_ids": list(r.hash_ids)}) + "\n")
