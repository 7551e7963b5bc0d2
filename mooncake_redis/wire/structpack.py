"""struct_pack (yalantinglibs), the payload format of coro_rpc: type descriptors that know
their literal and generate their own encoder and decoder source.

A wire type (``Int``, ``String``, ``Vector``, ``Struct`` ...) is usually built from a Python
annotation (``declare.wire_type``); its literal follows mechanically from the C++ type, and the
4-byte hash is ``MD5(literal)[:4]`` (big-endian) with the low bit meaning "a metainfo byte
follows". Every length field of one message has the same width, chosen from the largest
container in it (1, 2, 4 or 8 bytes). ``codec.Codec`` compiles the generated source once per
type and width: no per-field type dispatch at run time.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from .codegen import Widen as Widen
from .codegen import WireError as WireError
from .codegen import _Gen, _string_run

# Type codes (struct_pack type_id).
I32, U32, I64, U64, I8, U8, I16, U16 = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08
BOOL, CHAR = 0x0B, 0x0C
STRING, MAP, VECTOR, OPTIONAL, VARIANT, EXPECTED = 0x80, 0x82, 0x84, 0x85, 0x86, 0x87
MONOSTATE, STRUCT, END = 0xFA, 0xFD, 0xFF

META_LITERAL = 0b100  # metainfo bit: the type literal follows
MEMO_BYTES, MEMO_STRINGS = 64, 1024  # strings an encoder remembers: at most this long, this many


class Err(NamedTuple):
    """The error side of a ``tl::expected<T, ErrorCode>``."""

    code: int


def md5_hash32(data: bytes) -> int:
    """``MD5Hash32Constexpr``: the first four MD5 bytes read big-endian."""
    return int.from_bytes(hashlib.md5(data).digest()[:4], "big")


class WireType:
    """A struct_pack type: its literal, its fixed layout if any, and code generators."""

    literal: bytes = b""
    fmt: str | None = None  # struct format of a fixed-size value (scalars in order)
    min_size: int = 1

    def table(self) -> dict[Any, bytes] | None:
        """The encoding of every value of a type with a handful of values (``Bool``, ``void``,
        expected of those), so that a vector of them encodes with one ``bytes.join``."""
        return None

    def flat(self, expr: str) -> list[str]:
        """Scalar expressions of a fixed-size value, in ``fmt`` order."""
        return [expr]

    def rebuild(self, g: _Gen, names: list[str]) -> str:
        """Expression building the value from its decoded scalars (fixed-size types)."""
        return names[0]

    def gen_enc(self, g: _Gen, expr: str) -> None:
        if self.fmt is None:
            raise NotImplementedError(type(self).__name__)
        s = struct.Struct("<" + self.fmt)
        v = g.var()
        g.emit(f"{v} = {expr}")
        g.emit(f"out += {g.const(s.pack, 'P')}({', '.join(self.flat(v))})")

    def gen_dec(self, g: _Gen, target: str) -> None:
        if self.fmt is None:
            raise NotImplementedError(type(self).__name__)
        s = struct.Struct("<" + self.fmt)
        names = [g.var("s") for _ in self.fmt]
        g.emit(f"{', '.join(names)}, = {g.const(s.unpack_from, 'P')}(buf, pos)")
        g.emit(f"pos += {s.size}")
        g.emit(f"{target} = {self.rebuild(g, names)}")


class Int(WireType):
    def __init__(self, code: int, fmt: str) -> None:
        self.code, self.fmt = code, fmt
        self.literal = bytes([code])
        self.min_size = struct.calcsize("<" + fmt)


class Bool(WireType):
    literal, fmt = bytes([BOOL]), "?"

    def table(self) -> dict[Any, bytes] | None:
        return {True: b"\x01", False: b"\x00"}


class Monostate(WireType):
    """``std::monostate`` / ``void``: no bytes."""

    literal, min_size = bytes([MONOSTATE]), 0

    def table(self) -> dict[Any, bytes] | None:
        return {None: b""}

    def gen_enc(self, g: _Gen, expr: str) -> None:
        g.emit("pass")

    def gen_dec(self, g: _Gen, target: str) -> None:
        g.emit(f"{target} = None")


class String(WireType):
    """``std::string`` as ``str``; bytes that are not UTF-8 survive as surrogate escapes."""

    literal = bytes([STRING, CHAR])

    def gen_enc(self, g: _Gen, expr: str) -> None:
        """A short string's length and bytes are remembered (a reply repeats its protocol and
        endpoints in every replica); a bounded map per generated encoder."""
        x, b, n = g.var("x"), g.var("b"), g.var("n")
        memo = g.const(g.strings, "SM")
        g.emit(f"{x} = {expr}")
        g.emit(f"{b} = {memo}.get({x})")
        g.emit(f"if {b} is None:")
        g.indent += 1
        g.emit(f"{b} = {x}.encode('utf-8', 'surrogateescape')")
        g.emit(f"{n} = len({b})")
        g.emit(f"if {n} > {g.len_limit}: raise _Widen")
        g.emit(f"{b} = {g.const(g.len_pack, 'L')}({n}) + {b}")
        g.emit(f"if {n} <= {MEMO_BYTES} and len({memo}) < {MEMO_STRINGS}: {memo}[{x}] = {b}")
        g.indent -= 1
        g.emit(f"out += {b}")

    def gen_dec(self, g: _Gen, target: str) -> None:
        n, e = g.var("n"), g.var("e")
        g.read_len(n)
        g.emit(f"{e} = pos + {n}")
        g.emit(f"if {e} > end: raise _WireError('string past the end')")
        g.emit(f"{target} = buf[pos:{e}].decode('utf-8', 'surrogateescape')")
        g.emit(f"pos = {e}")


class Vector(WireType):
    def __init__(self, item: WireType) -> None:
        self.item = item
        self.literal = bytes([VECTOR]) + item.literal

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x, n = g.var("x"), g.var("n")
        g.emit(f"{x} = {expr}")
        g.emit(f"{n} = len({x})")
        g.write_len(n)
        it = self.item
        if isinstance(it, Int):  # memcpy'd elements: one pack call
            pack = g.const(struct.pack, "pk")
            g.emit(f"out += {pack}('<%d{it.fmt}' % {n}, *{x})")
            return
        table = it.table()
        if table is not None:  # one join; any other value (an Err) takes the loop below
            g.emit("try:")
            g.emit(f"    out += {g.const(b''.join, 'J')}(map({g.const(table.get, 'TG')}, {x}))")
            g.emit("except TypeError:")
            g.indent += 1
        i = g.var("i")
        g.emit(f"for {i} in {x}:")
        g.indent += 1
        it.gen_enc(g, i)
        g.indent -= 2 if table is not None else 1

    def gen_dec(self, g: _Gen, target: str) -> None:
        n, lst = g.var("n"), g.var("l")
        g.read_len(n)
        it = self.item
        size = max(it.min_size, 1)
        g.emit(f"if {n} * {size} > end - pos: raise _WireError('vector past the end')")
        if isinstance(it, Int):
            unpack = g.const(struct.unpack_from, "upk")
            g.emit(f"{target} = list({unpack}('<%d{it.fmt}' % {n}, buf, pos))")
            g.emit(f"pos += {n} * {it.min_size}")
            return
        run = isinstance(it, String) and g.width == 0
        if run:  # equal-length ASCII strings: one struct call (_string_run), else the loop
            g.emit(f"{lst} = {g.const(_string_run, 'SR')}(buf, pos, {n}, end) if {n} else None")
            g.emit(f"if {lst} is not None:")
            g.emit(f"    pos += {n} * (buf[pos] + 1)")
            g.emit("else:")
            g.indent += 1
        g.emit(f"{lst} = []")
        add = g.var("a")
        g.emit(f"{add} = {lst}.append")
        g.emit(f"for _ in range({n}):")
        g.indent += 1
        tmp = g.var("t")
        it.gen_dec(g, tmp)
        g.emit(f"{add}({tmp})")
        g.indent -= 2 if run else 1
        g.emit(f"{target} = {lst}")


class Map(WireType):
    """``std::map`` / ``std::unordered_map`` as ``dict``."""

    def __init__(self, key: WireType, value: WireType) -> None:
        self.key, self.value = key, value
        self.literal = bytes([MAP]) + key.literal + value.literal

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x, n, k, v = g.var("x"), g.var("n"), g.var("k"), g.var("v")
        g.emit(f"{x} = {expr}")
        g.emit(f"{n} = len({x})")
        g.write_len(n)
        g.emit(f"for {k}, {v} in {x}.items():")
        g.indent += 1
        self.key.gen_enc(g, k)
        self.value.gen_enc(g, v)
        g.indent -= 1

    def gen_dec(self, g: _Gen, target: str) -> None:
        n, d, k, v = g.var("n"), g.var("d"), g.var("k"), g.var("v")
        g.read_len(n)
        size = max(self.key.min_size + self.value.min_size, 1)
        g.emit(f"if {n} * {size} > end - pos: raise _WireError('map past the end')")
        g.emit(f"{d} = {{}}")
        g.emit(f"for _ in range({n}):")
        g.indent += 1
        self.key.gen_dec(g, k)
        self.value.gen_dec(g, v)
        g.emit(f"{d}[{k}] = {v}")
        g.indent -= 1
        g.emit(f"{target} = {d}")


def _flag(g: _Gen, name: str, what: str) -> None:
    g.emit(f"{name} = buf[pos]")
    g.emit("pos += 1")
    g.emit(f"if {name} > 1: raise _WireError('bad {what} flag')")


def _flagged(g: _Gen, flag: int, t: WireType, expr: str) -> None:
    """A flag byte and a value: one pack when the value has a fixed layout."""
    if t.fmt is None:
        g.emit(f"out.append({flag})")
        t.gen_enc(g, expr)
        return
    v = g.var()
    g.emit(f"{v} = {expr}")
    pack = g.const(struct.Struct("<B" + t.fmt).pack, "P")
    g.emit(f"out += {pack}({', '.join([str(flag), *t.flat(v)])})")


class Optional(WireType):
    """``std::optional<T>``: ``None`` or the value."""

    def __init__(self, item: WireType) -> None:
        self.item = item
        self.literal = bytes([OPTIONAL]) + item.literal

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x = g.var("x")
        g.emit(f"{x} = {expr}")
        g.emit(f"if {x} is None:")
        g.emit("    out.append(0)")
        g.emit("else:")
        g.indent += 1
        g.emit("out.append(1)")
        self.item.gen_enc(g, x)
        g.indent -= 1

    def gen_dec(self, g: _Gen, target: str) -> None:
        f = g.var("f")
        _flag(g, f, "optional")
        g.emit(f"if {f}:")
        g.indent += 1
        self.item.gen_dec(g, target)
        g.indent -= 1
        g.emit("else:")
        g.emit(f"    {target} = None")


class Expected(WireType):
    """``tl::expected<T, E>``: the value, or :class:`Err` carrying the error code."""

    def __init__(self, value: WireType, error: WireType | None = None) -> None:
        self.value = value
        self.error = error or Int(I32, "i")
        self.literal = bytes([EXPECTED]) + self.value.literal + self.error.literal
        self.min_size = 1 + min(self.value.min_size, self.error.min_size)

    def table(self) -> dict[Any, bytes] | None:
        values = self.value.table()
        return None if values is None else {k: b"\x01" + v for k, v in values.items()}

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x = g.var("x")
        g.emit(f"{x} = {expr}")
        g.emit(f"if type({x}) is {g.const(Err, 'Err')}:")
        g.indent += 1
        _flagged(g, 0, self.error, f"{x}[0]")
        g.indent -= 1
        g.emit("else:")
        g.indent += 1
        _flagged(g, 1, self.value, x)
        g.indent -= 1

    def gen_dec(self, g: _Gen, target: str) -> None:
        f, c = g.var("f"), g.var("c")
        _flag(g, f, "expected")
        g.emit(f"if {f}:")
        g.indent += 1
        self.value.gen_dec(g, target)
        g.indent -= 1
        g.emit("else:")
        g.indent += 1
        self.error.gen_dec(g, c)
        g.emit(f"{target} = _new({g.const(Err, 'Err')}, ({c},))")
        g.indent -= 1


class Variant(WireType):
    """``std::variant`` of struct alternatives: the value is an instance of one of them."""

    def __init__(self, alternatives: Sequence[tuple[type, WireType]]) -> None:
        self.alts = list(alternatives)
        if not 0 < len(self.alts) < 256:
            raise TypeError("a variant needs 1..255 alternatives")
        self.literal = bytes([VARIANT]) + b"".join(t.literal for _, t in self.alts) + bytes([END])
        self.min_size = 1 + min(t.min_size for _, t in self.alts)
        self.index = {cls: i for i, (cls, _) in enumerate(self.alts)}

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x, i = g.var("x"), g.var("i")
        g.emit(f"{x} = {expr}")
        g.emit(f"{i} = {g.const(self.index, 'VI')}[type({x})]")
        g.emit(f"out.append({i})")
        for n, (_, t) in enumerate(self.alts):
            g.emit(f"{'if' if n == 0 else 'elif'} {i} == {n}:")
            g.indent += 1
            t.gen_enc(g, x)
            g.indent -= 1

    def gen_dec(self, g: _Gen, target: str) -> None:
        i = g.var("i")
        g.emit(f"{i} = buf[pos]")
        g.emit("pos += 1")
        for n, (_, t) in enumerate(self.alts):
            g.emit(f"{'if' if n == 0 else 'elif'} {i} == {n}:")
            g.indent += 1
            t.gen_dec(g, target)
            g.indent -= 1
        g.emit("else:")
        g.emit("    raise _WireError('bad variant index')")


def size_literal(n: int) -> bytes:
    """struct_pack's literal of a size below 127 (alignments): n + 129."""
    if not 0 <= n < 127:
        raise ValueError("only small size literals are needed here")
    return bytes([n + 129])


class Struct(WireType):
    """A reflected struct (``YLT_REFL``), an argument tuple, or a trivially serializable struct
    (``std::pair``: its literal carries pack alignment and alignment, its value is memcpy'd).

    ``cls`` builds the value (a NamedTuple class, or ``tuple`` for argument lists); fields are
    read by index, so any sequence of the right length encodes."""

    def __init__(
        self,
        cls: type,
        fields: Sequence[WireType],
        trivial: tuple[int, int] | None = None,
    ) -> None:
        self.cls, self.fields, self.trivial = cls, list(fields), trivial
        body = b"".join(f.literal for f in self.fields)
        tail = size_literal(trivial[0]) + size_literal(trivial[1]) if trivial else b""
        self.literal = bytes([STRUCT]) + body + tail + bytes([END])
        self.min_size = sum(f.min_size for f in self.fields)
        fmts = [f.fmt for f in self.fields]
        self.fmt = "".join(f for f in fmts if f) if all(fmts) else None

    def flat(self, expr: str) -> list[str]:
        out: list[str] = []
        for i, f in enumerate(self.fields):
            out.extend(f.flat(f"{expr}[{i}]"))
        return out

    def rebuild(self, g: _Gen, names: list[str]) -> str:
        parts: list[str] = []
        at = 0
        for f in self.fields:
            k = len(f.fmt or "")
            parts.append(f.rebuild(g, names[at : at + k]))
            at += k
        return self._build(g, parts)

    def _build(self, g: _Gen, parts: list[str]) -> str:
        inner = ", ".join(parts) + ("," if len(parts) == 1 else "")
        if self.cls is tuple:
            return f"({inner})"
        return f"_new({g.const(self.cls, 'T')}, ({inner}))"

    def _runs(self) -> list[tuple[bool, list[int]]]:
        """Consecutive fields grouped: (fixed?, field indexes)."""
        runs: list[tuple[bool, list[int]]] = []
        for i, f in enumerate(self.fields):
            fixed = f.fmt is not None
            if runs and runs[-1][0] and fixed:
                runs[-1][1].append(i)
            else:
                runs.append((fixed, [i]))
        return runs

    def gen_enc(self, g: _Gen, expr: str) -> None:
        x = g.var("x")
        g.emit(f"{x} = {expr}")
        for fixed, idx in self._runs():
            if fixed:
                fmt = "".join(self.fields[i].fmt or "" for i in idx)
                args = [a for i in idx for a in self.fields[i].flat(f"{x}[{i}]")]
                pack = g.const(struct.Struct("<" + fmt).pack, "P")
                g.emit(f"out += {pack}({', '.join(args)})")
            else:
                self.fields[idx[0]].gen_enc(g, f"{x}[{idx[0]}]")

    def gen_dec(self, g: _Gen, target: str) -> None:
        parts: list[str] = []
        for fixed, idx in self._runs():
            if fixed:
                fmt = "".join(self.fields[i].fmt or "" for i in idx)
                s = struct.Struct("<" + fmt)
                names = [g.var("s") for _ in fmt]
                g.emit(f"{', '.join(names)}, = {g.const(s.unpack_from, 'P')}(buf, pos)")
                g.emit(f"pos += {s.size}")
                at = 0
                for i in idx:
                    k = len(self.fields[i].fmt or "")
                    parts.append(self.fields[i].rebuild(g, names[at : at + k]))
                    at += k
            else:
                t = g.var("f")
                self.fields[idx[0]].gen_dec(g, t)
                parts.append(t)
        g.emit(f"{target} = {self._build(g, parts)}")
