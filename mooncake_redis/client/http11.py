"""HTTP/1.1 for the clients without I/O: worker origins, request bytes, and a response parser
that the blocking and the asyncio transports both feed (:mod:`.transport`).

Only what a JSON RPC over keep-alive connections needs: one request at a time per connection
(no pipelining), bodies framed by Content-Length, chunked or the connection's end, 1xx heads
skipped. Anything else a worker or proxy sends is a :class:`ProtocolError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from ..errors import ErrorCode, MooncakeError

MAX_HEAD = 64 * 1024  # bytes of status line and headers


class ProtocolError(Exception):
    """The peer sent something that is not an HTTP/1.x response we can read."""


@dataclass(frozen=True)
class Origin:
    """Where one worker listens: ``http://host:port`` plus an optional path prefix."""

    scheme: str
    host: str
    port: int
    base: str  # path prefix, no trailing slash ("" for none)

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"url: not an http(s) URL: {url!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"url: bad port in {url!r}") from exc
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.base}"


def request_head(origin: Origin, method: str, path: str, headers: dict[str, str]) -> bytes:
    """Everything before ``Content-Length``'s value: the transports cache it per path."""
    lines = [f"{method} {origin.base}{path} HTTP/1.1", f"Host: {origin.authority}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


def request_bytes(head: bytes, body: bytes) -> bytes:
    return b"".join((head, str(len(body)).encode(), b"\r\n\r\n", body))


class Response(NamedTuple):
    status: int
    body: bytes
    keep_alive: bool  # the connection may carry the next request


class ResponseParser:
    """Feed it what the connection received; it returns the response once complete."""

    __slots__ = ("_body", "_chunk", "buf", "chunked", "keep_alive", "length", "status")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._reset()

    def _reset(self) -> None:
        self.status = 0  # 0 while the head is still coming
        self.length: int | None = None
        self.chunked = False
        self.keep_alive = True
        self._chunk: int | None = None  # bytes left in the current chunk; -1 in the trailers
        self._body = bytearray()

    def feed(self, data: bytes) -> Response | None:
        self.buf += data
        return self._step()

    def eof(self) -> Response | None:
        """The peer closed: a body delimited by the close is complete, anything else is not."""
        if self.status and self.length is None and not self.chunked:
            body = bytes(self.buf)
            self.buf.clear()
            return self._done(body, keep_alive=False)
        return None

    def _step(self) -> Response | None:
        buf = self.buf
        while not self.status:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError("response head too large")
                return None
            head = bytes(buf[:end])
            del buf[: end + 4]
            self._head(head)
            if 100 <= self.status < 200:  # 100 Continue and friends: the real head follows
                self._reset()
        if self.length is not None:
            if len(buf) < self.length:
                return None
            body = bytes(buf[: self.length])
            del buf[: self.length]
            return self._done(body, self.keep_alive)
        if self.chunked:
            return self._chunks()
        return None  # the body ends with the connection

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        try:
            self.status = int(rest[:3])
        except ValueError:
            raise ProtocolError(f"bad status line: {lines[0][:80]!r}") from None
        self.keep_alive = version == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    self.length = int(value)
                except ValueError:
                    raise ProtocolError(f"bad Content-Length: {value[:40]!r}") from None
            elif name == b"transfer-encoding":
                self.chunked = b"chunked" in value.lower()
            elif name == b"connection":
                token = value.strip().lower()
                if token == b"close":
                    self.keep_alive = False
                elif token == b"keep-alive":
                    self.keep_alive = True
        if self.chunked:
            self.length = None
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self.length = 0
        elif self.length is None:
            self.keep_alive = False  # read until the peer closes

    def _chunks(self) -> Response | None:
        buf = self.buf
        while True:
            if self._chunk is None or self._chunk == -1:
                eol = buf.find(b"\r\n")
                if eol < 0:
                    if len(buf) > MAX_HEAD:
                        raise ProtocolError("chunk header too large")
                    return None
                line = bytes(buf[:eol])
                del buf[: eol + 2]
                if self._chunk == -1:  # trailers, up to an empty line
                    if not line:
                        return self._done(bytes(self._body), self.keep_alive)
                    continue
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size: {line[:40]!r}") from None
                self._chunk = size if size else -1
                continue
            if len(buf) < self._chunk + 2:
                return None
            self._body += buf[: self._chunk]
            del buf[: self._chunk + 2]
            self._chunk = None

    def _done(self, body: bytes, keep_alive: bool) -> Response:
        response = Response(self.status, body, keep_alive and not self.buf)
        self._reset()
        return response
