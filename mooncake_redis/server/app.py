"""The worker's ASGI app: every RPC of :data:`~.schemas.RPCS` as ``POST /v1/<name>``
(:mod:`.routes`), plus ``/health``, ``/ready``, ``/metrics``, the OpenAPI document
(``/openapi.json``) and Swagger UI (``/docs``, offline: :mod:`.docs`).

The worker keeps no state another worker needs: the service object holds a Redis connection
pool and loaded scripts, the metrics are this process's own counters. Background tasks (the
janitor tick, the cached fsck, the evictor with ``evictor="auto"``) coordinate through Redis.
:func:`create_app` takes extra routers and lifespan hooks, for front ends that share the worker
(its service, metrics and shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse, Response
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ..backend import redact
from ..config import Config
from ..errors import ErrorCode, MooncakeError
from ..outage import FailureLog
from ..pausing import pause
from ..service import MasterService
from ..wire.metadata import add_metadata_routes
from .docs import docs_routes
from .metrics import CONTENT_TYPE, Metrics
from .routes import RpcRoute, exception_error, schema_routes, validation_message
from .schemas import RPCS, error_body, http_status

log = logging.getLogger("mooncake_redis.server")

# Everything else needs the token when one is set. The Swagger UI page and its assets hold no
# data; the page asks for the token and sends it with the requests it makes. The transfer
# engine's metadata client cannot send one (docs/wire.md).
OPEN_PATHS = frozenset({"/health", "/docs", "/metadata"})
OPEN_PREFIXES = ("/docs/assets/",)

# A front end sharing the worker: entered once the service is up, left before it stops.
LifespanHook = Callable[["Worker"], AbstractAsyncContextManager[None]]


@dataclass
class ServerSettings:
    config: Config = field(default_factory=Config)
    token: str | None = None
    evictor: str = "off"  # "auto": run the evictor coordinator in this worker
    janitor: bool = True  # tick the janitor (rate-limited across workers through Redis)
    fsck_interval_s: float = 300.0  # cached background fsck for the metrics; 0 = off
    metrics_refresh_s: float = 1.0
    # Started after the worker, stopped before it: objects with start(worker) and stop(), e.g.
    # the Mooncake wire listener (mooncake_redis.wire.listener).
    extensions: list[Any] = field(default_factory=list)

    def __repr__(self) -> str:  # never print the token or the Redis password
        return (
            f"ServerSettings(redis_url={redact(self.config.redis_url)!r}, "
            f"token={'set' if self.token else 'unset'}, evictor={self.evictor!r})"
        )


class JSONBody(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(exc: MooncakeError, status: int | None = None) -> JSONBody:
    return JSONBody({"error": error_body(exc)}, status_code=status or http_status(exc.code))


def exception_response(exc: Exception) -> JSONBody:
    """Any failure of a library call as the error shape; internals never leak secrets."""
    err, status = exception_error(exc)
    return error_response(err, status)


class BearerAuth:
    """Pure ASGI middleware: every HTTP path but /health needs ``Authorization: Bearer``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        if not path or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        got = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                got = value
                break
        if not hmac.compare_digest(got, self.expected):
            exc = MooncakeError(ErrorCode.ILLEGAL_CLIENT, "missing or wrong bearer token")
            resp = error_response(exc, 401)
            resp.headers["WWW-Authenticate"] = "Bearer"
            await resp(scope, receive, send)
            return
        await self.app(scope, receive, send)


class Worker:
    """What one app holds: settings, the service (after startup), metrics, background tasks."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.service: MasterService | None = None
        self.rpcs = list(RPCS.values())  # every row is a MasterService method (tests check it)
        self.metrics = Metrics(self.rpcs)
        self.scripts_loaded = False
        self.tasks: list[asyncio.Task[None]] = []
        self.evictor: Any = None
        self.stopping = False
        self._stop = asyncio.Event()

    def svc(self) -> MasterService:
        if self.service is None:
            raise MooncakeError(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, "worker is starting")
        return self.service

    async def start(self) -> None:
        cfg = self.settings.config
        log.info("connecting to %s", redact(cfg.redis_url))
        self.service = await MasterService.from_url(cfg.redis_url, cfg)
        try:
            await self.service.backend.load_scripts()
            self.scripts_loaded = True
        except RedisError as exc:
            log.warning("script preload failed (%s); EVALSHA falls back", type(exc).__name__)
        self.metrics.attach(self.service, self.settings.metrics_refresh_s)
        # The evictor coordinator runs the janitor while it holds the lease; a worker without
        # one ticks it itself (rate-limited across workers through Redis).
        evicting = self.settings.evictor == "auto"
        if self.settings.janitor and not evicting:
            self._spawn("janitor", self._janitor_loop)
        if self.settings.fsck_interval_s > 0:
            self._spawn("fsck", self._fsck_loop)
        if evicting:
            self._start_evictor()

    def _spawn(self, name: str, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.tasks.append(asyncio.create_task(fn(), name=f"mooncake-{name}"))

    async def _pause(self, seconds: float) -> bool:
        """Sleeps; False once the worker is stopping."""
        return not await pause(self._stop, seconds)

    async def _every(
        self,
        step: Callable[[], Awaitable[Any]],
        failures: FailureLog,
        first: float,
        interval: float,
    ) -> None:
        """Runs ``step`` after ``first`` seconds, then every ``interval``; after a failure, after
        the pause ``failures`` grows, with one log line per change of state."""
        pause = first
        while await self._pause(pause):
            try:
                await step()
            except Exception as exc:
                pause = failures.failed(exc)
            else:
                failures.ok()
                pause = interval

    async def _janitor_loop(self) -> None:
        svc = self.svc()
        interval = max(svc.config.janitor_interval_ms / 1000.0, 0.05)
        failures = FailureLog(log, "janitor", interval)
        await self._every(svc.run_janitor_once, failures, interval, interval)

    async def _fsck_loop(self) -> None:
        store = self.metrics.store
        assert store is not None
        every = self.settings.fsck_interval_s
        failures = FailureLog(log, "background fsck", 2.0, cap_s=every)
        await self._every(store.run_fsck, failures, min(every, 2.0), every)

    def _start_evictor(self) -> None:
        svc = self.svc()
        self.metrics.watch_eviction(svc.eviction_metrics)
        self.evictor = svc.eviction_coordinator()
        self.evictor.start()

    async def stop(self) -> None:
        self.stopping = True
        if self.evictor is not None:
            with contextlib.suppress(Exception):
                await self.evictor.stop()
        self._stop.set()
        if self.tasks:
            _, pending = await asyncio.wait(self.tasks, timeout=5.0)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2.0)
        self.tasks.clear()
        if self.service is not None:
            await self.service.aclose()
            self.service = None

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        info: dict[str, Any] = {"redis": False, "scripts": self.scripts_loaded}
        if self.service is None or self.stopping:
            info["status"] = "stopping" if self.stopping else "starting"
            return False, info
        try:
            await self.service.backend.time_ms()
            info["redis"] = True
            if not self.scripts_loaded:
                await self.service.backend.load_scripts()
                self.scripts_loaded = info["scripts"] = True
        except Exception as exc:
            info["detail"] = type(exc).__name__
        ok = bool(info["redis"] and info["scripts"])
        info["status"] = "ready" if ok else "not ready"
        return ok, info


def create_app(
    settings: ServerSettings | None = None,
    *,
    routers: Sequence[APIRouter] = (),
    lifespan_hooks: Sequence[LifespanHook] = (),
) -> FastAPI:
    """The worker app. ``routers`` are included after the RPCs (their routes join the OpenAPI
    document and the bearer check); each of ``lifespan_hooks`` is entered with the started
    worker and left before it stops, in reverse order."""
    settings = settings or ServerSettings()
    worker = Worker(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await worker.start()
        started: list[Any] = []
        try:
            async with contextlib.AsyncExitStack() as hooks:
                for hook in lifespan_hooks:
                    await hooks.enter_async_context(hook(worker))
                for ext in settings.extensions:
                    await ext.start(worker)
                    started.append(ext)
                yield
        finally:
            for ext in reversed(started):
                await ext.stop()
            await worker.stop()

    app = FastAPI(
        title="mooncake-redis master worker",
        version="1",
        description=(
            "Mooncake Store master RPCs and the radix-tree index over HTTP/JSON. Errors answer "
            '{"error": {"code", "name", "message"}} with Mooncake error codes.'
        ),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.worker = worker
    # The RPCs first: one dict lookup per request before any other route is tried.
    app.router.routes.insert(0, RpcRoute(worker, worker.rpcs))
    described = schema_routes(worker.rpcs)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=[*described, *app.routes],
                separate_input_output_schemas=app.separate_input_output_schemas,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(MooncakeError)
    async def on_mooncake(_: Request, exc: MooncakeError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_: Request, exc: RequestValidationError) -> Response:
        message = validation_message(exc.errors())
        return error_response(MooncakeError(ErrorCode.INVALID_PARAMS, message))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> Response:
        return error_response(
            MooncakeError(ErrorCode.INVALID_PARAMS, str(exc.detail)), exc.status_code
        )

    @app.get("/health", tags=["ops"], summary="Liveness: the process answers.")
    async def health() -> Response:
        return JSONBody({"status": "ok"})

    @app.get(
        "/ready",
        tags=["ops"],
        summary="Readiness: Redis reachable, scripts loaded.",
        responses={503: {"description": "not ready: starting, stopping or Redis unreachable"}},
    )
    async def ready() -> Response:
        ok, info = await worker.ready()
        return JSONBody(info, status_code=200 if ok else 503)

    @app.get(
        "/metrics", tags=["ops"], summary="Prometheus metrics.", response_class=PlainTextResponse
    )
    async def metrics() -> Response:
        return Response(await worker.metrics.render(), media_type=CONTENT_TYPE)

    assert app.openapi_url is not None
    app.router.routes.extend(docs_routes(app.openapi_url, needs_token=bool(settings.token)))
    add_metadata_routes(app, worker)
    for router in routers:
        app.include_router(router)
    if settings.token:
        app.add_middleware(BearerAuth, token=settings.token)
    return app
