"""The HTTP API in process (ASGI transport, embedded fakeredis): every error shape and status,
the bearer token, health/ready, the OpenAPI document, metrics names, and that the endpoint
table matches the library's method signatures."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mooncake_redis import Config, ErrorCode, MasterService
from mooncake_redis.server.app import ServerSettings, create_app
from mooncake_redis.server.schemas import HTTP_STATUS, RPCS
from tests.helpers import h

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def make_settings(**kw: Any) -> ServerSettings:
    cfg = Config(
        redis_url=f"fakeredis://{uuid.uuid4().hex}",
        enable_radix_tree=True,
        num_shards=8,
        max_key_length=200,
    )
    kw.setdefault("fsck_interval_s", 0)
    kw.setdefault("evictor", "off")
    return ServerSettings(config=cfg, **kw)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(token=TOKEN))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://worker", headers=AUTH
        ) as client:
            yield client


def err(resp: httpx.Response, status: int, code: ErrorCode) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    e = body["error"]
    assert e["code"] == int(code) and e["name"] == code.name and isinstance(e["message"], str)
    return dict(e)


async def post(c: httpx.AsyncClient, rpc: str, body: Any) -> httpx.Response:
    return await c.post(f"/v1/{rpc}", json=body)


SEG = {"segment": {"id": "seg-a", "size": 1 << 20}, "client_id": "c1"}


def test_table_matches_library_signatures() -> None:
    for name, rpc in RPCS.items():
        method = getattr(MasterService, name, None)
        assert method is not None, f"{name}: no such MasterService method"
        params = [p for p in inspect.signature(method).parameters if p != "self"]
        assert params == list(rpc.request.model_fields), name
    for code in ErrorCode:
        assert code in HTTP_STATUS


async def test_health_ready_openapi(http: httpx.AsyncClient) -> None:
    r = await http.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = await http.get("/ready")
    assert r.status_code == 200 and r.json()["redis"] and r.json()["scripts"]
    doc = (await http.get("/openapi.json")).json()
    for name in RPCS:
        op = doc["paths"][f"/v1/{name}"]["post"]
        assert "requestBody" in op and "200" in op["responses"] and "400" in op["responses"]
    schemas = doc["components"]["schemas"]
    assert schemas["PutStartRequest"]["additionalProperties"] is False


async def test_token_required_everywhere_but_health() -> None:
    app = create_app(make_settings(token=TOKEN))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            assert (await c.get("/health")).status_code == 200
            for path in ("/ready", "/metrics", "/openapi.json"):
                r = await c.get(path)
                err(r, 401, ErrorCode.ILLEGAL_CLIENT)
                assert r.headers["www-authenticate"] == "Bearer"
            for name in RPCS:
                err(await c.post(f"/v1/{name}", json={}), 401, ErrorCode.ILLEGAL_CLIENT)
            bad = {"Authorization": "Bearer wrong"}
            err(await c.post("/v1/exist_key", json={"key": "k"}, headers=bad), 401,
                ErrorCode.ILLEGAL_CLIENT)  # fmt: skip
            err(await c.post("/v1/exist_key", json={"key": "k"}, headers={"Authorization": TOKEN}),
                401, ErrorCode.ILLEGAL_CLIENT)  # fmt: skip
            ok = await c.post("/v1/exist_key", json={"key": "k"}, headers=AUTH)
            assert ok.status_code == 200 and ok.json() == {"result": False}


async def test_no_token_configured_means_open() -> None:
    app = create_app(make_settings())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            assert (await c.post("/v1/exist_key", json={"key": "k"})).status_code == 200


async def test_malformed_and_mistyped_bodies_are_invalid_params(http: httpx.AsyncClient) -> None:
    ctype = {"content-type": "application/json"}
    for raw in (b"{bad json", b"", b"[1, 2]", b'"str"', b"null", b"\xff\xfe"):
        r = await http.post("/v1/exist_key", content=raw, headers=ctype)
        err(r, 400, ErrorCode.INVALID_PARAMS)
    cases = [
        ("exist_key", {}),  # missing field
        ("exist_key", {"key": 5}),  # wrong type
        ("exist_key", {"key": "k", "extra": 1}),  # unknown field
        ("batch_exist_key", {"keys": "k"}),
        ("batch_exist_key", {"keys": [1, 2]}),
        ("put_start", {"client_id": "c", "key": "k", "slice_lengths": "100"}),
        ("put_start", {"client_id": "c", "key": "k", "slice_lengths": 1.5}),
        ("put_start", {"client_id": "c", "key": "k", "slice_lengths": [1], "config": {"x": 1}}),
        ("put_start", {"client_id": "c", "key": "k", "slice_lengths": [1],
                       "config": {"replica_num": "1"}}),
        ("remove", {"key": "k", "force": "yes"}),
        ("mount_segment", {"segment": {"id": "s", "size": 10, "color": 1}, "client_id": "c"}),
        ("get_subtree_keys", {"prefix_hash": "x", "max_depth": -1}),
        ("batch_register_radix_tree_node", {"items": [{"prefix_hash": "x"}]}),
        ("batch_exist_key", {"keys": ["k"] * 9000}),  # over MAX_BATCH
    ]  # fmt: skip
    for rpc, body in cases:
        e = err(await post(http, rpc, body), 400, ErrorCode.INVALID_PARAMS)
        assert e["message"], (rpc, body)


async def test_library_errors_map_to_codes_and_statuses(http: httpx.AsyncClient) -> None:
    # Semantic refusals come from the library with its codes.
    err(await post(http, "exist_key", {"key": ""}), 400, ErrorCode.INVALID_PARAMS)
    err(await post(http, "exist_key", {"key": "k" * 300}), 400, ErrorCode.INVALID_KEY)
    err(await post(http, "put_start", {"client_id": "c1", "key": "a", "slice_lengths": [0]}),
        400, ErrorCode.INVALID_PARAMS)  # fmt: skip
    err(await post(http, "put_start", {"client_id": "c1", "key": "a", "slice_lengths": [8],
                                      "config": {"replica_num": 0}}),
        400, ErrorCode.INVALID_PARAMS)  # fmt: skip
    err(await post(http, "remove_by_regex", {"pattern": "(unclosed"}), 400,
        ErrorCode.INVALID_PARAMS)  # fmt: skip
    # No segment mounted: no buffer anywhere.
    e = err(await post(http, "put_start", {"client_id": "c1", "key": "a", "slice_lengths": [8]}),
            507, ErrorCode.NO_AVAILABLE_HANDLE)  # fmt: skip
    assert e["message"]
    assert (await post(http, "mount_segment", SEG)).json() == {"result": None}
    err(await post(http, "get_replica_list", {"key": "nope"}), 404, ErrorCode.OBJECT_NOT_FOUND)
    err(await post(http, "get_keys_by_prefix", {"prefix_hash": h("none")}), 404,
        ErrorCode.OBJECT_NOT_FOUND)  # fmt: skip
    err(await post(http, "remove", {"key": "nope"}), 404, ErrorCode.OBJECT_NOT_FOUND)
    err(await post(http, "put_end", {"client_id": "c1", "key": "nope"}), 404,
        ErrorCode.OBJECT_NOT_FOUND)  # fmt: skip
    r = await post(http, "put_start", {"client_id": "c1", "key": "obj", "slice_lengths": [64]})
    assert r.status_code == 200
    [rep] = r.json()["result"]
    assert rep["status"] == "PROCESSING" and rep["size"] == 64 and rep["segment_id"] == "seg-a"
    err(await post(http, "put_start", {"client_id": "c1", "key": "obj", "slice_lengths": [64]}),
        409, ErrorCode.OBJECT_ALREADY_EXISTS)  # fmt: skip
    err(await post(http, "get_replica_list", {"key": "obj"}), 409,
        ErrorCode.REPLICA_IS_NOT_READY)  # fmt: skip
    err(await post(http, "put_end", {"client_id": "intruder", "key": "obj"}), 403,
        ErrorCode.ILLEGAL_CLIENT)  # fmt: skip
    err(await post(http, "remove", {"key": "obj"}), 409, ErrorCode.REPLICA_IS_NOT_READY)
    assert (await post(http, "put_end", {"client_id": "c1", "key": "obj"})).status_code == 200
    err(await post(http, "put_revoke", {"client_id": "c1", "key": "obj"}), 409,
        ErrorCode.INVALID_WRITE)  # fmt: skip
    got = (await post(http, "get_replica_list", {"key": "obj"})).json()["result"]
    assert got["lease_ttl_ms"] > 0 and got["replicas"][0]["status"] == "COMPLETE"
    err(await post(http, "remove", {"key": "obj"}), 409, ErrorCode.OBJECT_HAS_LEASE)
    assert (await post(http, "remove", {"key": "obj", "force": True})).json() == {"result": None}
    assert (await post(http, "exist_key", {"key": "obj"})).json() == {"result": False}


async def test_batch_results_carry_per_item_errors(http: httpx.AsyncClient) -> None:
    await post(http, "mount_segment", SEG)
    r = await post(http, "batch_put_start", {"client_id": "c1", "keys": ["a", "b", ""],
                                             "slice_lengths": [8, [4, 4], 8]})  # fmt: skip
    assert r.status_code == 200
    a, b, bad = r.json()["results"]
    assert set(a) == {"result"} and a["result"][0]["size"] == 8 and b["result"][0]["size"] == 8
    assert bad == {"error": {"code": -600, "name": "INVALID_PARAMS",
                             "message": bad["error"]["message"]}}  # fmt: skip
    r = await post(http, "batch_put_end", {"client_id": "c1", "keys": ["a", "zz"]})
    assert r.json()["results"][0] == {"result": None}
    assert r.json()["results"][1]["error"]["name"] == "OBJECT_NOT_FOUND"
    r = await post(http, "batch_exist_key", {"keys": ["a", "b", "zz"]})
    assert [x["result"] for x in r.json()["results"]] == [True, False, False]
    r = await post(http, "batch_get_replica_list", {"keys": ["a", "zz"]})
    ok, missing = r.json()["results"]
    assert ok["result"]["replicas"] and missing["error"]["code"] == -704
    r = await post(http, "batch_remove", {"keys": ["a", "zz"], "force": True})
    assert r.json()["results"][0] == {"result": None}
    assert r.json()["results"][1]["error"]["code"] == -704
    # Radix batch registration: one result per item, a bad item does not fail the others.
    p, c = h("p"), h("c")
    r = await post(http, "batch_register_radix_tree_node", {"items": [
        {"prefix_hash": p, "parent_prefix_hash": "", "keys": [p + "_0_k"]},
        {"prefix_hash": c, "parent_prefix_hash": p, "keys": [c + "_0_k"]},
        {"prefix_hash": c, "parent_prefix_hash": c, "keys": [c]},
    ]})  # fmt: skip
    res = r.json()["results"]
    assert res[0] == {"result": None} and res[1] == {"result": None}
    assert res[2]["error"]["name"] == "INVALID_PARAMS"
    tree = (await post(http, "get_subtree_keys", {"prefix_hash": p, "max_depth": 3})).json()
    assert sorted(tree["result"]["keys"]) == sorted([p + "_0_k", c + "_0_k"])
    r = await post(http, "unregister_radix_tree_keys", {"keys": [c + "_0_k"]})
    assert r.json() == {"result": 1}


async def test_unknown_route_and_method(http: httpx.AsyncClient) -> None:
    err(await http.post("/v1/no_such_rpc", json={}), 404, ErrorCode.INVALID_PARAMS)
    err(await http.get("/v1/exist_key"), 405, ErrorCode.INVALID_PARAMS)


async def test_metrics_names(http: httpx.AsyncClient) -> None:
    await post(http, "mount_segment", SEG)
    await post(http, "batch_exist_key", {"keys": ["a", "b"]})
    await post(http, "exist_key", {"key": ""})
    await post(http, "register_radix_tree_node", {"prefix_hash": h(1), "parent_prefix_hash": "",
                                                  "keys": [h(1)]})  # fmt: skip
    text = (await http.get("/metrics")).text
    for name in (
        "master_batch_exist_key_requests_total 1.0",
        "master_batch_exist_key_items_total 2.0",
        "master_batch_exist_key_failed_items_total 0.0",
        "master_exist_key_failures_total 1.0",
        'mooncake_rpc_latency_seconds_count{rpc="batch_exist_key"} 1.0',
        "master_key_count",
        "master_total_capacity_bytes 1.048576e+06",
        'segment_total_capacity_bytes{segment="seg-a"}',
        "master_allocated_bytes",
        "mooncake_radix_nodes 1.0",
        "mooncake_radix_registered_keys 1.0",
        "mooncake_radix_leaves 1.0",
        "master_active_clients",
    ):
        assert name in text, name
    assert TOKEN not in text


async def test_background_fsck_feeds_gauges() -> None:
    app = create_app(make_settings(fsck_interval_s=0.05))
    async with app.router.lifespan_context(app):
        store = app.state.worker.metrics.store
        await store.run_fsck()
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            text = (await c.get("/metrics")).text
    for name in ("mooncake_radix_shells", "mooncake_radix_orphaned_objects 0.0",
                 "mooncake_radix_dangling_edges 0.0", "mooncake_fsck_clean 1.0",
                 "mooncake_radix_max_depth"):  # fmt: skip
        assert name in text, name


async def test_ready_fails_when_redis_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    async def down() -> int:
        raise RedisConnectionError("Connection refused")

    app = create_app(make_settings())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            assert (await c.get("/ready")).status_code == 200
            backend = app.state.worker.service.backend
            monkeypatch.setattr(backend, "time_ms", down)
            r = await c.get("/ready")
            assert r.status_code == 503 and r.json()["redis"] is False
            assert (await c.get("/health")).status_code == 200

            async def broken(*a: Any, **k: Any) -> Any:
                raise RedisConnectionError("Connection refused")

            monkeypatch.setattr(backend, "call", broken)
            err(await c.post("/v1/exist_key", json={"key": "k"}), 503, ErrorCode.RPC_FAIL)


async def test_json_body_whatever_the_content_type(http: httpx.AsyncClient) -> None:
    """``curl -d`` sends application/x-www-form-urlencoded; other clients send none at all."""
    await post(http, "mount_segment", SEG)
    body = b'{"client_id": "c1", "keys": ["ck"], "slice_lengths": [8]}'
    for headers in (
        {"content-type": "application/x-www-form-urlencoded"},  # curl -d
        {},  # no Content-Type header
        {"content-type": "text/plain"},
    ):
        r = await http.post("/v1/exist_key", content=b'{"key": "ck"}', headers=headers)
        assert r.status_code == 200 and r.json() == {"result": False}, r.text
    r = await http.post(
        "/v1/batch_put_start", content=body,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["results"][0]["result"][0]["size"] == 8
    # Still strict: a form body is not JSON, a wrong type is not coerced.
    r = await http.post("/v1/exist_key", content=b"key=ck",
                        headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    err(r, 400, ErrorCode.INVALID_PARAMS)
    r = await http.post("/v1/exist_key", content=b'{"key": 7}', headers={})
    e = err(r, 400, ErrorCode.INVALID_PARAMS)
    assert e["message"] == "key: Input should be a valid string"


async def test_curl_examples_over_a_socket() -> None:
    """The documented ``curl -d`` calls, sent by curl itself to a real uvicorn worker."""
    import asyncio
    import shutil

    import uvicorn

    from tests.servers import free_port

    curl = shutil.which("curl")
    assert curl, "curl is needed for the documented examples"
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(make_settings(token=TOKEN)), port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)

        async def run(*args: str) -> str:
            proc = await asyncio.create_subprocess_exec(
                curl, "-s", "-H", f"Authorization: Bearer {TOKEN}", *args,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await proc.communicate()
            assert proc.returncode == 0
            return out.decode()

        url = f"http://127.0.0.1:{port}/v1"
        seg = '{"segment": {"id": "seg-0", "size": 1073741824}, "client_id": "engine-0"}'
        assert await run("-d", seg, f"{url}/mount_segment") == '{"result":null}'
        put = '{"client_id": "engine-0", "keys": ["a"], "slice_lengths": [4096]}'
        assert '"status":"PROCESSING"' in await run("-d", put, f"{url}/batch_put_start")
        done = '{"client_id": "engine-0", "keys": ["a"]}'
        assert await run("-d", done, f"{url}/batch_put_end") == '{"results":[{"result":null}]}'
        got = await run("-d", '{"keys": ["a", "missing"]}', f"{url}/batch_exist_key")
        assert got == '{"results":[{"result":true},{"result":false}]}'
        out = await run("-i", "-d", '{"key": "missing"}', f"{url}/get_replica_list")
        assert out.startswith("HTTP/1.1 404") and '"name":"OBJECT_NOT_FOUND"' in out
        out = await run("-i", "-d", '{"key": 7}', f"{url}/exist_key")
        assert out.startswith("HTTP/1.1 400") and "key: Input should be a valid string" in out
    finally:
        server.should_exit = True
        await task


@pytest.mark.parametrize("token", [TOKEN, None])
async def test_docs_page_and_assets_load_offline(token: str | None) -> None:
    """/docs is Swagger UI served from the package (no CDN); with a token the page and its
    assets open without it (they hold no data), the document still needs it."""
    app = create_app(make_settings(token=token))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            page = await c.get("/docs")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            html = page.text
            assert "http://" not in html and "https://" not in html  # nothing from the network
            assert f"const NEEDS_TOKEN = {'true' if token else 'false'};" in html
            assert 'const SPEC = "/openapi.json";' in html
            for name, kind, marker in (
                ("swagger-ui-bundle.js", "text/javascript", b"SwaggerUIBundle"),
                ("swagger-ui.css", "text/css", b".swagger-ui"),
                ("favicon.png", "image/png", b"\x89PNG"),
            ):
                assert f'"/docs/assets/{name}"' in html
                r = await c.get(f"/docs/assets/{name}")
                assert r.status_code == 200 and r.headers["content-type"].startswith(kind), name
                assert marker in r.content[:200_000], name
            # The open prefix serves the listed files only (no way out of it without the token).
            err(await c.get("/docs/assets/..%2Fopenapi.json"), 404, ErrorCode.INVALID_PARAMS)
            err(await c.get("/docs/assets/secret.txt"), 404, ErrorCode.INVALID_PARAMS)
            spec = await c.get("/openapi.json", headers=AUTH if token else {})
            assert spec.status_code == 200 and "/v1/exist_key" in spec.json()["paths"]
            if token:
                err(await c.get("/openapi.json"), 401, ErrorCode.ILLEGAL_CLIENT)


def test_serve_runs_on_uvloop_and_httptools() -> None:
    from mooncake_redis.cli.serve import event_loop_and_parser

    assert event_loop_and_parser() == ("uvloop", "httptools")  # uvicorn[standard]


async def test_extra_routers_and_lifespan_hooks() -> None:
    """Front ends that share a worker (e.g. another protocol's listener) plug in here."""
    import contextlib

    from fastapi import APIRouter

    from mooncake_redis.server.app import Worker

    events: list[str] = []

    @contextlib.asynccontextmanager
    async def hook(worker: Worker) -> AsyncIterator[None]:
        assert worker.service is not None  # entered once the service is up
        events.append("start")
        yield
        assert worker.service is not None  # left before it stops
        events.append("stop")

    router = APIRouter()

    @router.get("/metadata/ping", tags=["metadata"])
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    app = create_app(make_settings(token=TOKEN), routers=[router], lifespan_hooks=[hook])
    async with app.router.lifespan_context(app):
        assert events == ["start"]
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
            err(await c.get("/metadata/ping"), 401, ErrorCode.ILLEGAL_CLIENT)
            assert (await c.get("/metadata/ping", headers=AUTH)).json() == {"pong": "yes"}
            doc = (await c.get("/openapi.json", headers=AUTH)).json()
            assert "/metadata/ping" in doc["paths"] and "/v1/exist_key" in doc["paths"]
    assert events == ["start", "stop"]
