"""The transfer engine's HTTP metadata on worker processes (real Redis and the cluster): what one
worker stores another serves, a restarted worker loses nothing, statuses and bodies as the real
master's metadata server answers (measured), open even when the worker has a token."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from mooncake_redis.config import Config
from mooncake_redis.server.app import ServerSettings, create_app
from mooncake_redis.server.fleet import WorkerFleet
from tests.conftest import _cleanup


@pytest.fixture
async def fleet(real_backend_url: str) -> AsyncIterator[WorkerFleet]:
    ns = "tm" + uuid.uuid4().hex[:10]
    f = WorkerFleet(real_backend_url, ns, 8, 2, worker_args=["--evictor", "off"])
    await f.start_all()
    try:
        yield f
    finally:
        f.stop_all()
        _cleanup(real_backend_url, ns)


async def test_metadata_is_shared_by_workers_and_survives_a_restart(fleet: WorkerFleet) -> None:
    a, b = fleet.urls
    key = "mooncake/ram/127.0.0.1:18307"
    desc = b'{"buffers":[],"name":"127.0.0.1:18307","protocol":"tcp"}'
    async with httpx.AsyncClient() as http:
        r = await http.put(f"{a}/metadata", params={"key": key}, content=desc)
        assert (r.status_code, r.text) == (200, "metadata updated")
        r = await http.get(f"{b}/metadata", params={"key": key})
        assert (r.status_code, r.content) == (200, desc)
        assert r.headers["content-type"] == "application/json"
        # The client sends the key URL-encoded; the same entry either way.
        r = await http.get(f"{b}/metadata?key=mooncake%2Fram%2F127.0.0.1%3A18307")
        assert r.content == desc
        fleet.workers[0].kill()  # type: ignore[union-attr]
        fleet.workers[0].wait()  # type: ignore[union-attr]
        fleet.start_worker(0)
        await fleet.wait_ready(0)
        r = await http.get(f"{a}/metadata", params={"key": key})
        assert (r.status_code, r.content) == (200, desc)
        r = await http.delete(f"{b}/metadata", params={"key": key})
        assert (r.status_code, r.text) == (200, "metadata deleted")
        r = await http.get(f"{a}/metadata", params={"key": key})
        assert (r.status_code, r.text) == (404, "metadata not found")
        r = await http.delete(f"{a}/metadata", params={"key": key})
        assert (r.status_code, r.text) == (404, "metadata not found")
        r = await http.get(f"{a}/get_all_keys")
        assert (r.status_code, r.text) == (200, "")


async def test_rpc_meta_keys_are_written_once(fleet: WorkerFleet) -> None:
    a, b = fleet.urls
    key = "mooncake/rpc_meta/127.0.0.1:18307"
    async with httpx.AsyncClient() as http:
        r = await http.put(f"{a}/metadata", params={"key": key}, content=b"A")
        assert (r.status_code, r.text) == (200, "metadata updated")
        r = await http.put(f"{b}/metadata", params={"key": key}, content=b"A")
        assert (r.status_code, r.text) == (200, "metadata unchanged")
        r = await http.put(f"{b}/metadata", params={"key": key}, content=b"B")
        assert (r.status_code, r.text) == (400, "Duplicate rpc_meta key not allowed")
        assert (await http.get(f"{a}/metadata", params={"key": key})).content == b"A"
        other = "mooncake/ram/x"
        for value in (b"1", b"2"):  # any other key is overwritten
            r = await http.put(f"{a}/metadata", params={"key": other}, content=value)
            assert r.status_code == 200
        assert (await http.get(f"{b}/metadata", params={"key": other})).content == b"2"
        r = await http.put(f"{a}/metadata", params={"key": "empty"}, content=b"")
        assert r.status_code == 200
        r = await http.get(f"{a}/metadata", params={"key": "empty"})
        assert (r.status_code, r.content) == (200, b"")
        for method in ("GET", "PUT", "DELETE"):
            r = await http.request(method, f"{a}/metadata")
            assert (r.status_code, r.text) == (400, "Missing key parameter"), method


async def test_metadata_needs_no_token_the_rest_does() -> None:
    cfg = Config(redis_url=f"fakeredis://{uuid.uuid4().hex}")
    app = create_app(ServerSettings(config=cfg, token="T", fsck_interval_s=0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as http:
            r = await http.put("/metadata", params={"key": "k"}, content=b"v")
            assert (r.status_code, r.text) == (200, "metadata updated")
            assert (await http.get("/metadata", params={"key": "k"})).content == b"v"
            assert (await http.get("/get_all_keys")).status_code == 401
            auth = {"Authorization": "Bearer T"}
            assert (await http.get("/get_all_keys", headers=auth)).status_code == 200
