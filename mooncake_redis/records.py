"""The formats the store scripts reply and keep: replies, outbox entries, allocation records.

One place per format, since the segments, objects, janitor and fsck all decode them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import MooncakeError

FreePair = tuple[int, str]  # (shard, outbox entry "segment id|offset|put id")


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
