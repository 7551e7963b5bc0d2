"""``POST /v1/<name>`` for every row of :data:`.schemas.RPCS`, as one Starlette route.

FastAPI's endpoint machinery costs several times the RPC's own Python work on a small call: it
decodes the body with the stdlib json, builds its dependency graph per request and validates
the decoded object field by field. Here a request costs about what a bare ASGI handler does:
the raw body goes to pydantic's ``model_validate_json`` once (so the Content-Type does not
matter: ``curl -d`` sends form-urlencoded), the result goes out through one ``orjson.dumps``.
The request models stay strict (400 INVALID_PARAMS, never a 500). FastAPI still describes every
endpoint in the OpenAPI document: :func:`schema_routes` gives it one APIRoute per row, for the
document only.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from fastapi.routing import APIRoute
from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

from ..backend import map_redis_error
from ..errors import ErrorCode, MooncakeError
from .schemas import ErrorResponse, Rpc, count_errors, error_body, http_status

if TYPE_CHECKING:
    from starlette.datastructures import URLPath

    from ..service import MasterService
    from .metrics import Metrics

log = logging.getLogger("mooncake_redis.server")

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "INVALID_PARAMS and other caller errors"},
    401: {"model": ErrorResponse, "description": "missing or wrong bearer token"},
    403: {"model": ErrorResponse, "description": "ILLEGAL_CLIENT: another client's put"},
    404: {"model": ErrorResponse, "description": "OBJECT_NOT_FOUND, SEGMENT_NOT_FOUND"},
    409: {"model": ErrorResponse, "description": "OBJECT_ALREADY_EXISTS, OBJECT_HAS_LEASE"},
    503: {"model": ErrorResponse, "description": "Redis unreachable (RPC_FAIL)"},
    507: {"model": ErrorResponse, "description": "NO_AVAILABLE_HANDLE: no space, Redis OOM"},
}


def exception_error(exc: Exception) -> tuple[MooncakeError, int]:
    """Any failure of a library call as a Mooncake error and its HTTP status, through the one
    Redis mapping (:func:`~mooncake_redis.backend.map_redis_error`); internals never reach the
    message of anything else."""
    mapped = map_redis_error(exc, "the call")
    if mapped is not None:
        return mapped, http_status(mapped.code)
    if isinstance(exc, RedisError):
        log.error("Redis error: %s", type(exc).__name__)
        return MooncakeError(ErrorCode.INTERNAL_ERROR, "Redis error"), 500
    log.exception("internal error")
    return MooncakeError(ErrorCode.INTERNAL_ERROR, type(exc).__name__), 500


def error_json(exc: MooncakeError) -> bytes:
    return orjson.dumps({"error": error_body(exc)})


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """The first five problems as ``field.path: what``; ``body`` for the body as a whole."""
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(errors) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body; None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        if not message.get("more_body", False):
            return b"".join([*chunks, chunk]) if chunks else chunk
        chunks.append(chunk)


async def send_json(
    send: Send, status: int, payload: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class RouteHost(Protocol):
    """What a route needs of the worker (:class:`.app.Worker`): the service it calls and the
    metrics it counts in. A protocol, so that the routes need not import the app."""

    @property
    def metrics(self) -> Metrics: ...

    def svc(self) -> MasterService: ...


class RpcEndpoint:
    """One RPC: validate the body once, call the library, encode, count."""

    def __init__(self, worker: RouteHost, rpc: Rpc) -> None:
        self.worker = worker
        self.rpc = rpc
        self.model = rpc.request
        self.observe = worker.metrics.rpc.observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        if body is None:
            return
        try:
            request = self.model.model_validate_json(body)
        except ValidationError as exc:
            err = MooncakeError(ErrorCode.INVALID_PARAMS, validation_message(exc.errors()))
            await send_json(send, 400, error_json(err))
            return
        rpc = self.rpc
        start = time.perf_counter()
        try:
            result = await getattr(self.worker.svc(), rpc.name)(**request.to_kwargs())
            payload = orjson.dumps(rpc.encode(result))
        except Exception as exc:
            self.observe(rpc.name, time.perf_counter() - start, True)
            err, status = exception_error(exc)
            await send_json(send, status, error_json(err))
            return
        if rpc.batch:
            bad = count_errors(result)
            self.observe(rpc.name, time.perf_counter() - start, False, len(result), bad)
        else:
            self.observe(rpc.name, time.perf_counter() - start, False)
        await send_json(send, 200, payload)


class RpcRoute(BaseRoute):
    """Every ``/v1/<name>`` path in one dict lookup; another method on one of them is 405."""

    def __init__(self, worker: RouteHost, rpcs: Iterable[Rpc]) -> None:
        self.endpoints = {rpc.path: RpcEndpoint(worker, rpc) for rpc in rpcs}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            path: str = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            endpoint = self.endpoints.get(path)
            if endpoint is not None:
                match = Match.FULL if scope["method"] == "POST" else Match.PARTIAL
                return match, {"rpc_endpoint": endpoint}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            err = MooncakeError(ErrorCode.INVALID_PARAMS, "Method Not Allowed")
            await send_json(send, 405, error_json(err), [(b"allow", b"POST")])
            return
        await scope["rpc_endpoint"](scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)


def _describe(rpc: Rpc) -> Callable[..., None]:
    def endpoint(body: Any) -> None:  # pragma: no cover - the document's, never called
        raise AssertionError(f"{rpc.path} is served by RpcRoute")

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=rpc.request)]
    )
    endpoint.__name__ = rpc.name
    return endpoint


def schema_routes(rpcs: Iterable[Rpc]) -> list[APIRoute]:
    """One APIRoute per RPC, for the OpenAPI document only (requests never reach them)."""
    return [
        APIRoute(
            rpc.path,
            _describe(rpc),
            methods=["POST"],
            response_model=rpc.response_model,
            responses=ERROR_RESPONSES,
            summary=rpc.summary or rpc.name,
            tags=["batch" if rpc.batch else "rpc"],
            operation_id=rpc.name,
        )
        for rpc in rpcs
    ]
