"""The buffer that a struct_pack type writes its generated encoder or decoder into (lines,
unique names, constants), the two exceptions generated code raises, and a helper it calls."""

from __future__ import annotations

import struct
from typing import Any

_LEN_STRUCTS = [struct.Struct(f) for f in ("<B", "<H", "<I", "<Q")]
_LEN_LIMITS = (0xFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)


class WireError(Exception):
    """A payload that does not decode (truncated, wrong hash, bad flag): the caller answers
    coro_rpc ``invalid_rpc_arguments``."""


class Widen(Exception):
    """Raised by a generated encoder when a container does not fit the current length width."""


class _Gen:
    """Source being generated for one codec: lines, unique names, constants."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {"_Widen": Widen, "_WireError": WireError, "_new": tuple.__new__}
        self.indent = 1
        self._n = 0
        self.strings: dict[str, bytes] = {}  # encoded strings (length first), by value
        self.len_limit = _LEN_LIMITS[width]
        self.len_pack = _LEN_STRUCTS[width].pack

    def var(self, prefix: str = "v") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, obj: Any, prefix: str = "C") -> str:
        for name, value in self.ns.items():
            if value is obj:
                return name
        name = f"_{prefix}{len(self.ns)}"
        self.ns[name] = obj
        return name

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def write_len(self, n: str) -> None:
        w = self.width
        self.emit(f"if {n} > {_LEN_LIMITS[w]}: raise _Widen")
        if w == 0:
            self.emit(f"out.append({n})")
        else:
            self.emit(f"out += {self.const(_LEN_STRUCTS[w].pack, 'L')}({n})")

    def read_len(self, n: str) -> None:
        if self.width == 0:
            self.emit(f"{n} = buf[pos]")
            self.emit("pos += 1")
        else:
            s = _LEN_STRUCTS[self.width]
            self.emit(f"{n}, = {self.const(s.unpack_from, 'U')}(buf, pos)")
            self.emit(f"pos += {s.size}")


_RUNS: dict[tuple[int, int], Any] = {}  # (length, count) -> unpack_from of that run
_RUNS_MAX = 256  # remembered formats; each of at most _RUN_ITEMS fields (a few MB in all)
_RUN_ITEMS = 1024


def _string_run(buf: Any, pos: int, n: int, end: int) -> list[str] | None:
    """A vector of ``n`` strings with one-byte lengths that are all the same length and ASCII
    (the common batch: keys of one format), read with one ``struct`` call and one ``map``
    instead of a Python step per string; None for any other, or a longer one (the general loop
    reads it)."""
    if type(buf) is not bytes or n > _RUN_ITEMS:
        return None
    size = buf[pos]
    e = pos + n * (size + 1)
    if e > end or buf[pos : e : size + 1] != bytes((size,)) * n or not buf[pos:e].isascii():
        return None
    unpack = _RUNS.get((size, n))
    if unpack is None:
        unpack = struct.Struct(f"x{size}s" * n).unpack_from
        if len(_RUNS) >= _RUNS_MAX:
            _RUNS.clear()
        _RUNS[(size, n)] = unpack
    return list(map(bytes.decode, unpack(buf, pos)))
