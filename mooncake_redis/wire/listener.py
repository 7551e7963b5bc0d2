"""The hook that runs the coro_rpc listener inside a worker (``serve --mooncake-port``): started
after the worker's service, stopped before it, on the same event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from .frontend import WireFrontend
from .parents import ParentHints
from .server import WireMetrics, WireServer


class WireListener:
    """A worker extension (``ServerSettings.extensions``)."""

    def __init__(self, host: str, port: int, graceful_timeout: float = 30.0) -> None:
        self.host, self.port = host, port
        self.graceful_timeout = graceful_timeout
        self.server: WireServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, worker: Any) -> None:
        svc = worker.svc()
        cfg = svc.config
        hints = ParentHints(svc, cfg.wire_parent_hint_ttl_ms) if cfg.wire_infer_parents else None
        self.server = WireServer(
            WireFrontend(svc, hints),
            self.host,
            self.port,
            metrics=WireMetrics(worker.metrics.registry),
        )
        await self.server.start()
        self._loop = asyncio.get_running_loop()

    def begin_drain(self) -> None:
        """Stop accepting (safe to call from a signal handler): with a shared port, new
        connections then reach the other workers while this one finishes its own."""
        if self._loop is not None and self.server is not None:
            self._loop.call_soon_threadsafe(self.server.stop_accepting)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(self.graceful_timeout)
            self.server = None
