"""The compiled codec of one top-level type: the message head (hash, metainfo, literal) and
one generated encoder and decoder per length width."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .codegen import Widen, WireError, _Gen
from .structpack import META_LITERAL, WireType, md5_hash32

EncodeFn = Callable[[Any, bytearray], None]
DecodeFn = Callable[[bytes, int], tuple[Any, int]]


def _compile(t: WireType, width: int, kind: str) -> Any:
    g = _Gen(width)
    if kind == "enc":
        t.gen_enc(g, "value")
        head = "def _f(value, out):"
    else:
        g.emit("end = len(buf)")
        t.gen_dec(g, "result")
        g.emit("return result, pos")
        head = "def _f(buf, pos):"
    src = "\n".join([head, *g.lines])
    code = compile(src, f"<struct_pack {kind} {t.literal.hex()} w{width}>", "exec")
    exec(code, g.ns)
    fn = g.ns["_f"]
    fn.__source__ = src  # for debugging: the generated code
    return fn


class Codec:
    """Encoder and decoder of one top-level type, compiled per length width on first use."""

    def __init__(self, t: WireType) -> None:
        self.type = t
        self.literal = t.literal
        self.types_code = md5_hash32(t.literal) & 0xFFFFFFFE
        self._literal_tail = t.literal + b"\0"
        self._enc: list[EncodeFn | None] = [None] * 4
        self._dec: list[DecodeFn | None] = [None] * 4
        self._head = [struct.pack("<I", self.types_code)]

    def encoder(self, width: int) -> EncodeFn:
        fn = self._enc[width]
        if fn is None:
            fn = self._enc[width] = _compile(self.type, width, "enc")
        return fn

    def decoder(self, width: int) -> DecodeFn:
        fn = self._dec[width]
        if fn is None:
            fn = self._dec[width] = _compile(self.type, width, "dec")
        return fn

    def encode(self, value: Any, literal: bool = True) -> bytes:
        """The message: hash head, metainfo (when a literal or a wide length needs it), the
        literal, the payload. Raises ``ValueError`` for a value the type cannot hold."""
        for width in range(4):
            out = bytearray()
            try:
                self.encoder(width)(value, out)
            except Widen:
                continue
            except (struct.error, TypeError, KeyError, IndexError, AttributeError) as exc:
                raise ValueError(f"cannot encode as {self.literal.hex()}: {exc}") from exc
            meta = (width << 3) | (META_LITERAL if literal else 0)
            if not meta:
                return self._head[0] + bytes(out)
            head = struct.pack("<IB", self.types_code | 1, meta)
            return head + (self._literal_tail if literal else b"") + bytes(out)
        raise ValueError("a container longer than 2^64")  # pragma: no cover

    def decode(self, body: bytes) -> Any:
        """The value of a message with or without its literal; bytes after it are ignored
        (as coro_rpc does). Raises :class:`WireError` for anything else."""
        try:
            if len(body) < 4:
                raise WireError("no type hash")
            (code,) = struct.unpack_from("<I", body, 0)
            if code >> 1 != self.types_code >> 1:
                raise WireError(f"type hash {code:#010x}, expected {self.types_code | 1:#010x}")
            pos, width = 4, 0
            if code & 1:
                meta = body[4]
                pos = 5
                if meta & 0b11:
                    raise WireError("compatible fields are not used by any Mooncake type")
                if meta & META_LITERAL:
                    end = pos + len(self._literal_tail)
                    if body[pos:end] != self._literal_tail:
                        raise WireError("type literal differs")
                    pos = end
                width = (meta >> 3) & 0b11
            value, _ = self.decoder(width)(body, pos)
            return value
        except WireError:
            raise
        except (IndexError, struct.error, UnicodeError, ValueError, KeyError, TypeError) as exc:
            raise WireError(f"malformed payload: {type(exc).__name__}: {exc}") from exc
