"""Fixtures: every service test runs on fakeredis, the real Redis, and a real Redis Cluster.

The cluster (3 masters on free loopback ports) is started once per session from the
``redis-server`` binary and stopped at the end. Each test gets a fresh namespace, so tests never
see each other's keys, and its keys are deleted afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from mooncake_redis import Config, MasterService
from tests.servers import RedisCluster, ensure_standalone, standalone_url

BACKENDS = os.environ.get("MOONCAKE_REDIS_TEST_BACKENDS", "fake,redis,cluster").split(",")


@pytest.fixture(scope="session")
def redis_url() -> str:
    return ensure_standalone(standalone_url())


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisCluster]:
    c = RedisCluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest) -> str:
    kind = request.param
    if kind == "fake":
        return f"fakeredis://{uuid.uuid4().hex}"
    if kind == "redis":
        return str(request.getfixturevalue("redis_url"))
    if kind == "cluster":
        return str(request.getfixturevalue("cluster").url)
    raise ValueError(kind)


@pytest.fixture(params=[b for b in BACKENDS if b != "fake"])
def real_backend_url(request: pytest.FixtureRequest) -> str:
    """Real servers only: for tests that span processes (fakeredis lives in one)."""
    if request.param == "redis":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("cluster").url)


def _cleanup(url: str, namespace: str) -> None:
    if url.startswith("fakeredis"):
        return
    pattern = "{" + namespace + ":*"

    def drop(conn: Any) -> None:
        batch: list[Any] = []
        for key in conn.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                _unlink(conn, batch)
        _unlink(conn, batch)

    if "+cluster" in url:
        client: Any = redis.RedisCluster.from_url(url.replace("+cluster", ""))
        for node in client.get_primaries():
            drop(client.get_redis_connection(node))
        client.close()
    else:
        r = redis.Redis.from_url(url)
        drop(r)
        r.close()


def _unlink(conn: Any, batch: list[Any]) -> None:
    """One round trip per batch; one key per command (a cluster node refuses cross-slot)."""
    if batch:
        pipe = conn.pipeline(transaction=False)
        for key in batch:
            pipe.unlink(key)
        pipe.execute()
        batch.clear()


@pytest.fixture
async def make_service(backend_url: str) -> AsyncIterator[Any]:
    """Factory: ``await make_service(**config)``; services share one fresh namespace."""
    namespace = "t" + uuid.uuid4().hex[:12]
    made: list[MasterService] = []

    async def make(**overrides: Any) -> MasterService:
        overrides.setdefault("num_shards", 8)
        cfg = Config(namespace=namespace, redis_url=backend_url, **overrides)
        svc = await MasterService.from_url(backend_url, cfg)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        await svc.aclose()
    _cleanup(backend_url, namespace)


@pytest.fixture
async def service(make_service: Any) -> MasterService:
    svc: MasterService = await make_service(enable_radix_tree=True)
    return svc
