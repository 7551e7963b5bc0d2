"""``/docs``: Swagger UI with no network, and usable when the worker has a token.

FastAPI's page loads Swagger UI from a CDN (blank offline) and a browser cannot add a bearer
header to a page it opens. The assets come from the ``fastapi-offline`` package, which ships the
Swagger UI bundle; the page and its assets hold no data and need no token. When the worker has
one, the page asks for it, keeps it in the tab's sessionStorage and sends it with every request
it makes (the document ``/openapi.json`` and "Try it out"), which still need it.
"""

from __future__ import annotations

import importlib.resources
import json
from functools import cache

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..errors import ErrorCode, MooncakeError
from .routes import error_json

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mooncake-redis worker: API</title>
<link rel="icon" type="image/png" href="{root}/docs/assets/favicon.png">
<link rel="stylesheet" href="{root}/docs/assets/swagger-ui.css">
<style>#auth {{ margin: 2em; font-family: sans-serif; }} #auth input {{ width: 24em; }}</style>
</head>
<body>
<form id="auth" hidden>
  <p>This worker needs its bearer token (<code>serve --token</code>); it stays in this tab only.</p>
  <label>Token <input id="token" type="password" autocomplete="off" autofocus></label>
  <button type="submit">Open</button> <span id="why"></span>
</form>
<div id="swagger-ui"></div>
<script src="{root}/docs/assets/swagger-ui-bundle.js"></script>
<script>
const NEEDS_TOKEN = {needs_token};
const SPEC = {spec_url};
const KEY = "mooncake-redis-token";
const form = document.getElementById("auth");

async function openDocs(token) {{
  const headers = token ? {{ Authorization: "Bearer " + token }} : {{}};
  const resp = await fetch(SPEC, {{ headers }});
  if (resp.status === 401) {{
    sessionStorage.removeItem(KEY);
    document.getElementById("why").textContent = token ? "wrong token" : "";
    form.hidden = false;
    return;
  }}
  form.hidden = true;
  document.getElementById("why").textContent = "";
  window.ui = SwaggerUIBundle({{
    spec: await resp.json(),
    dom_id: "#swagger-ui",
    deepLinking: true,
    requestInterceptor: (req) => {{
      if (token) req.headers["Authorization"] = "Bearer " + token;
      return req;
    }},
  }});
}}

form.addEventListener("submit", (e) => {{
  e.preventDefault();
  const token = document.getElementById("token").value.trim();
  sessionStorage.setItem(KEY, token);
  openDocs(token);
}});
openDocs(NEEDS_TOKEN ? sessionStorage.getItem(KEY) : null);
</script>
</body>
</html>
"""


@cache
def asset(name: str) -> bytes:
    return (importlib.resources.files("fastapi_offline") / "static" / name).read_bytes()


def docs_routes(openapi_url: str, needs_token: bool) -> list[Route]:
    """``/docs`` and ``/docs/assets/<name>`` (only the files the page uses)."""

    async def page(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        html = PAGE.format(
            root=root,
            needs_token="true" if needs_token else "false",
            spec_url=json.dumps(root + openapi_url),
        )
        return HTMLResponse(html)

    async def asset_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            err = MooncakeError(ErrorCode.INVALID_PARAMS, f"no such asset: {name}")
            return Response(error_json(err), status_code=404, media_type="application/json")
        return Response(
            asset(name),
            media_type=ASSETS[name],
            headers={"cache-control": "public, max-age=86400"},
        )

    return [
        Route("/docs", page, methods=["GET"], include_in_schema=False),
        Route("/docs/assets/{name}", asset_file, methods=["GET"], include_in_schema=False),
    ]
