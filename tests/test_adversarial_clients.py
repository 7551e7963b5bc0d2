"""Issue 14 items 2, 3 and 8: clients are never expired for the store's own trouble, OOM makes
room, and unmount ownership.

- Redis at maxmemory for longer than ``client_live_ttl_ms``: pings keep working (allow-oom), so
  the janitor expires nobody and every acknowledged object stays (before: 200 of 200 lost). A
  put refused for memory answers NO_AVAILABLE_HANDLE (HTTP 507) and raises the eviction flag;
  an eviction pass then runs for Redis memory and frees objects.
- A Redis outage (or restart from AOF) longer than the ttl: the janitor judges silence only over
  time the service heard (its heartbeat has a gap), and a ping revives a known client instead
  of answering NEED_REMOUNT (before: 100 of 100 lost). A client that stays silent after the
  outage is still expired once the service has heard for a ttl.
- ``unmount_check_owner``: only the client that mounted a segment may unmount it.

OOM and outages need a real server: throwaway redis-servers on free loopback ports.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.server.app import ServerSettings, create_app
from tests.helpers import h
from tests.servers import saturate

TTL = 1000
CFG = dict(
    namespace="clients",
    num_shards=8,
    enable_radix_tree=True,
    client_live_ttl_ms=TTL,
    default_kv_lease_ttl_ms=0,
)


@pytest.fixture
async def small_redis() -> AsyncIterator[Any]:
    from tests.servers import RedisProcess, free_port

    server = RedisProcess(
        free_port(),
        Path(tempfile.mkdtemp(prefix="mcr-oom14-")),
        ["--maxmemory", "4mb", "--maxmemory-policy", "noeviction", "--appendonly", "no"],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop(kill=True)


@pytest.fixture
async def aof_redis() -> AsyncIterator[Any]:
    from tests.servers import RedisProcess, free_port

    server = RedisProcess(
        free_port(),
        Path(tempfile.mkdtemp(prefix="mcr-out14-")),
        ["--appendonly", "yes", "--appendfsync", "always"],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop(kill=True)


async def put_chain(
    svc: MasterService, tag: str, n: int, client: str = "c", segment: str = "s"
) -> list[str]:
    keys, parent = [], ""
    for i in range(n):
        key = h(f"{tag}{i}")
        cfg = ReplicateConfig(parent_block_hash=parent, preferred_segment=segment)
        await svc.put_start(client, key, [64], cfg)
        await svc.put_end(client, key)
        keys.append(key)
        parent = key if i % 10 else ""
    return keys


async def fill_to_oom(port: int) -> tuple[Any, list[str]]:
    """Plain keys outside the namespace until Redis refuses writes; the connection stays open."""
    admin = redis.asyncio.Redis(port=port)
    return admin, await saturate(admin)


async def test_oom_longer_than_the_client_ttl_loses_nothing(small_redis: Any) -> None:
    url = small_redis.url
    svc = await MasterService.from_url(url, Config(**CFG, redis_url=url))
    try:
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 30, "ep"), "c")
        acked = await put_chain(svc, "oom", 200)
        admin, _ = await fill_to_oom(small_redis.port)
        # A put is refused for memory: NO_AVAILABLE_HANDLE, as no room in a segment would be.
        with pytest.raises(MooncakeError) as exc:
            await svc.put_start("c", h("refused"), [64])
        assert exc.value.code == ErrorCode.NO_AVAILABLE_HANDLE, exc.value
        assert "memory" in exc.value.message
        # At maxmemory for 2.5 ttls: the client pings, the janitor runs (gated and forced).
        t_end = time.monotonic() + 2.5 * TTL / 1000
        runs = 0
        while time.monotonic() < t_end:
            assert (await svc.ping("c")).client_status == "OK"
            runs += (await svc.run_janitor_once()).ran
            await svc.run_janitor_once(force=True)
            await asyncio.sleep(0.2)
        assert runs >= 1  # the janitor's turn is taken at maxmemory too
        assert [s.id for s in await svc.segment_stats()] == ["s"]
        assert all(await svc.batch_exist_key(acked))
        await admin.aclose()
    finally:
        await svc.aclose()


async def test_oom_triggers_eviction_and_answers_507(small_redis: Any) -> None:
    url = small_redis.url
    svc = await MasterService.from_url(url, Config(**CFG, redis_url=url))
    try:
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 30, "ep"), "c")
        acked = await put_chain(svc, "ev", 300)
        admin, fillers = await fill_to_oom(small_redis.port)
        with pytest.raises(MooncakeError) as exc:
            await svc.put_start("c", h("refused"), [64])
        assert exc.value.code == ErrorCode.NO_AVAILABLE_HANDLE
        # The refusal raised the durable eviction flag (from a script allowed at OOM) ...
        assert (await svc.evictor_lease.read()).flag.startswith("oom:")
        # ... and a pass, not forced, runs for Redis memory (the segment is nearly empty).
        assert await svc.used_ratio() < 0.01
        res = await svc.evict_once()
        assert res.reason == "redis_memory" and res.evicted_objects > 0, res
        assert not (await svc.evictor_lease.read()).flag
        assert sum(await svc.batch_exist_key(acked)) == len(acked) - res.evicted_objects
        # Over HTTP the same refusal is 507 NO_AVAILABLE_HANDLE.
        again, _ = await fill_to_oom(small_redis.port)
        app = create_app(
            ServerSettings(config=Config(**CFG, redis_url=url), fsck_interval_s=0, evictor="off")
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app)
            async with httpx.AsyncClient(transport=transport, base_url="http://w") as c:
                r = await c.post(
                    "/v1/put_start",
                    json={"client_id": "c", "key": h("http"), "slice_lengths": [64]},
                )
                assert r.status_code == 507, r.text
                assert r.json()["error"]["code"] == int(ErrorCode.NO_AVAILABLE_HANDLE)
                r = await c.post("/v1/ping", json={"client_id": "c"})
                assert r.status_code == 200, r.text
                assert r.json()["result"]["client_status"] == "OK", r.text
        await admin.delete(*fillers)
        await admin.aclose()
        await again.aclose()
        report = await fsck(svc)
        assert report.only_allowed, report.to_dict()["problems"]
    finally:
        await svc.aclose()


async def _restart(server: Any, down_s: float) -> None:
    server.stop(kill=True)
    await asyncio.sleep(down_s)
    await asyncio.to_thread(server.start)


async def _until_up(svc: MasterService) -> None:
    for _ in range(100):
        try:
            await svc.heartbeat()
            return
        except MooncakeError as exc:
            assert exc.code == ErrorCode.RPC_FAIL, exc
            await asyncio.sleep(0.05)
    raise AssertionError("Redis did not come back")


async def test_outage_longer_than_the_client_ttl_loses_nothing(aof_redis: Any) -> None:
    url = aof_redis.url
    svc = await MasterService.from_url(url, Config(**CFG, redis_url=url))
    try:
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 30, "ep"), "c")
        await svc.mount_segment(Segment("q", "q", 1 << 41, 1 << 30, "ep"), "quiet")
        acked = await put_chain(svc, "out", 100)
        quiet = await put_chain(svc, "quiet", 5, client="quiet", segment="q")
        for _ in range(3):  # the service hears: ticks and pings
            await svc.ping("c")
            await svc.run_janitor_once(force=True)
            await asyncio.sleep(0.1)
        # Redis is down for twice the client ttl, then comes back from its AOF.
        await _restart(aof_redis, 2 * TTL / 1000)
        await _until_up(svc)
        # The janitor right after the restart expires nobody: the outage was the service's.
        rep = await svc.run_janitor_once(force=True)
        assert rep.expired_clients == 0 and rep.unmounted_segments == 0, rep
        # A ping revives the known client (its record survived) instead of NEED_REMOUNT.
        assert (await svc.ping("c")).client_status == "OK"
        # From now on the service hears again; "c" keeps pinging, "quiet" stays silent until
        # it is expired (after a ttl of heard time; later when a loaded machine stalls a tick).
        t_min, deadline = time.monotonic() + 1.6 * TTL / 1000, time.monotonic() + 15
        while time.monotonic() < t_min or any(await svc.batch_exist_key(quiet)):
            assert time.monotonic() < deadline, "the quiet client was never expired"
            await svc.ping("c")
            await svc.run_janitor_once(force=True)
            await asyncio.sleep(0.1)
        assert all(await svc.batch_exist_key(acked))
        # A client silent for a ttl of heard time is still expired, as always.
        assert not any(await svc.batch_exist_key(quiet))
        assert [s.id for s in await svc.segment_stats()] == ["s"]
        assert (await svc.ping("quiet")).client_status == "NEED_REMOUNT"
        report = await fsck(svc)
        assert report.clean, report.to_dict()["problems"]
    finally:
        await svc.aclose()


async def test_no_expiry_while_no_worker_ticks(aof_redis: Any) -> None:
    """Redis up but every worker gone (only a standalone evictor ticks): nothing is heard, so
    nobody is expired; once a worker ticks again, silence counts from then."""
    url = aof_redis.url
    svc = await MasterService.from_url(url, Config(**CFG, redis_url=url))
    evictor = await MasterService.from_url(url, Config(**CFG, redis_url=url))
    evictor.hears_clients = False
    try:
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 30, "ep"), "c")
        acked = await put_chain(svc, "deaf", 10)
        t_end = time.monotonic() + 2 * TTL / 1000
        while time.monotonic() < t_end:
            rep = await evictor.run_janitor_once(force=True)
            assert rep.expired_clients == 0
            await asyncio.sleep(0.1)
        assert all(await svc.batch_exist_key(acked))
        assert (await svc.ping("c")).client_status == "OK"
    finally:
        await evictor.aclose()
        await svc.aclose()


async def test_unmount_ownership_check(make_service: Any) -> None:
    svc = await make_service(enable_radix_tree=True, unmount_check_owner=True)
    await svc.mount_segment(Segment("mine", "mine", 1 << 40, 1 << 20), "owner")
    key = h("owned")
    await svc.put_start("owner", key, [64])
    await svc.put_end("owner", key)
    for intruder in ("intruder", ""):
        with pytest.raises(MooncakeError) as exc:
            await svc.unmount_segment("mine", intruder)
        assert exc.value.code == ErrorCode.ILLEGAL_CLIENT
    [st] = await svc.segment_stats()
    assert st.mounted and await svc.exist_key(key)
    await svc.unmount_segment("unknown-segment", "intruder")  # unknown: OK, as Mooncake
    await svc.unmount_segment("mine", "owner")
    assert await svc.segment_stats() == [] and not await svc.exist_key(key)
    assert (await fsck(svc)).clean
    # Without the check (the default, as Mooncake) any caller may unmount.
    plain = await make_service(enable_radix_tree=True)
    await plain.mount_segment(Segment("other", "other", 1 << 41, 1 << 20), "owner")
    await plain.unmount_segment("other", "somebody-else")
    assert await plain.segment_stats() == []
