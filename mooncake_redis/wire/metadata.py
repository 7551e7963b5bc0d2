"""The transfer engine's HTTP metadata server (``GET/PUT/DELETE /metadata?key=...``) on every
worker's HTTP port, kept in Redis (one HASH under the global tag), so a reader on one worker finds
a segment a writer registered through another, and a worker restart loses nothing.

Answers as Mooncake's own server does (measured against the real master's, cinatra): 200
``metadata updated`` / ``metadata unchanged`` / ``metadata deleted``, GET 200 with the stored
bytes as ``application/json``, 404 ``metadata not found``, 400 ``Missing key parameter``, 400
``Duplicate rpc_meta key not allowed`` for a second, different value of an ``rpc_meta`` key.
One difference: the key is URL-decoded (the real server keeps ``%2F`` as three characters); the
client always encodes the same way, so both find what it stored.

The transfer engine cannot send a bearer token, so ``/metadata`` is open even when the worker
has ``--token``; serve the HTTP port on a trusted network only (as Mooncake's server).

Also ``GET /get_all_keys``, the real master's admin listing (one complete key per line, no
lease granted), so tools that sample a master's contents work against a worker too.

These routes answer plain text as Mooncake's servers do, not the JSON API's error shape, so
they stay out of the OpenAPI document (docs/http-api.md lists them).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from ..lua_calls import te_metadata_put

PATH = "/metadata"
MAX_VALUE_BYTES = 16 * 1024 * 1024  # segment descriptors are a few KiB


def _text(body: str, status: int = 200) -> Response:
    return PlainTextResponse(body, status_code=status)


def add_metadata_routes(app: FastAPI, worker: Any) -> None:
    """``worker`` is the app's Worker (``svc()`` gives the started service)."""

    def where() -> tuple[Any, str]:
        svc = worker.svc()
        return svc, svc.keys.global_key("te_metadata")

    @app.get(PATH, include_in_schema=False)
    async def get_metadata(key: str = "") -> Response:
        if not key:
            return _text("Missing key parameter", 400)
        svc, hkey = where()
        value = await svc.backend.command("HGET", hkey, key)
        if value is None:
            return _text("metadata not found", 404)
        return Response(bytes(value), media_type="application/json")

    @app.put(PATH, include_in_schema=False)
    async def put_metadata(request: Request, key: str = "") -> Response:
        if not key:
            return _text("Missing key parameter", 400)
        body = await request.body()
        if len(body) > MAX_VALUE_BYTES:
            return _text("metadata too large", 413)
        svc, _ = where()
        outcome = await te_metadata_put(svc.ctx, key, body)
        if outcome == "duplicate":
            return _text("Duplicate rpc_meta key not allowed", 400)
        return _text(f"metadata {outcome}")

    @app.get("/get_all_keys", include_in_schema=False)
    async def get_all_keys() -> Response:
        keys = await worker.svc().complete_keys()
        return PlainTextResponse("".join(k + "\n" for k in keys))

    @app.delete(PATH, include_in_schema=False)
    async def delete_metadata(key: str = "") -> Response:
        if not key:
            return _text("Missing key parameter", 400)
        svc, hkey = where()
        if not await svc.backend.command("HDEL", hkey, key, idempotent=False):
            return _text("metadata not found", 404)
        return _text("metadata deleted")
