"""The clients over an httpx transport (``transport=``), for tests and in-process use: e.g.
``httpx.ASGITransport(app)`` calls a worker app without a socket, ``httpx.MockTransport``
injects failures. httpx's exceptions are sorted into :class:`.NotSent` / :class:`.MaybeSent`
as the socket transports' are, so the retry policy is the same."""

from __future__ import annotations

from typing import Any

import httpx

from .http11 import Origin
from .transport import MaybeSent, NotSent, Options, Reply

# Nothing was sent (connection not made, no pool slot); anything else may have been.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _options(options: Options) -> dict[str, Any]:
    timeout = httpx.Timeout(options.timeout, connect=options.connect_timeout)
    return {"headers": options.headers, "timeout": timeout}


def _sorted(exc: httpx.TransportError) -> NotSent | MaybeSent:
    kind = NotSent if isinstance(exc, NOT_SENT) else MaybeSent
    return kind(f"{type(exc).__name__}: {exc}")


class HttpxSyncTransport:
    def __init__(self, transport: httpx.BaseTransport, options: Options) -> None:
        self.http = httpx.Client(transport=transport, **_options(options))

    def request(self, origin: Origin, method: str, path: str, body: bytes = b"") -> Reply:
        try:
            r = self.http.request(method, origin.url + path, content=body or None)
        except httpx.TransportError as exc:
            raise _sorted(exc) from exc
        return r.status_code, r.content

    def close(self) -> None:
        self.http.close()


class HttpxAsyncTransport:
    def __init__(self, transport: httpx.AsyncBaseTransport, options: Options) -> None:
        self.http = httpx.AsyncClient(transport=transport, **_options(options))

    async def request(self, origin: Origin, method: str, path: str, body: bytes = b"") -> Reply:
        try:
            r = await self.http.request(method, origin.url + path, content=body or None)
        except httpx.TransportError as exc:
            raise _sorted(exc) from exc
        return r.status_code, r.content

    async def aclose(self) -> None:
        await self.http.aclose()
