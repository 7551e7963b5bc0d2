"""Issue 14 item 7: the namespace's recorded settings, read-only tools, restarts, URLs.

- the radix setting is recorded with the shard count, and a process that differs is refused
  (a worker without the radix index used to store children whose parents were absent);
- after Redis restarts empty, a running worker records the meta again (its next tick or ping),
  so a process with another shard count is refused; a worker that finds another process's
  settings recorded stops serving;
- the first cross-shard put after a Redis restart succeeds (an idempotent step is resent once
  on a lost connection);
- ``fsck`` and ``inspect`` write nothing and say that a namespace does not exist;
- a malformed Redis URL (``redis:/host:port``) is refused instead of going to localhost:6379.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.backend import Backend
from mooncake_redis.cli import main as cli_main
from mooncake_redis.config import SCHEMA_VERSION
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.testing.probes import snapshot
from tests.helpers import h, hashes_in_shard
from tests.servers import RedisProcess, free_port


@pytest.mark.parametrize(
    "url",
    [
        "redis:/127.0.0.1:6379",  # one slash: used to go to localhost:6379 silently
        "redis:127.0.0.1:6379",
        "redis://",
        "redis://127.0.0.1:notaport",
        "redis://127.0.0.1:6379/notadb",
        "redis+cluster://127.0.0.1:7000/3",
        "unix://host/tmp/redis.sock",
        "http://127.0.0.1:6379",
        "127.0.0.1:6379",
    ],
)
async def test_malformed_redis_urls_are_refused(url: str) -> None:
    with pytest.raises(MooncakeError) as exc:
        Backend.from_url(url)
    assert exc.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(MooncakeError):
        await MasterService.from_url(url, Config(namespace="never"))


async def test_wellformed_redis_urls_pass() -> None:
    for url in (
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/0",
        "redis://u:p@localhost:6380/2",
        "rediss://host",
        "redis+cluster://127.0.0.1:7000",
        "unix:///tmp/redis.sock",
        "fakeredis://",
        "fakeredis://name",
    ):
        backend = Backend.from_url(url)  # builds the client; connects on first use
        assert backend.url == url
        await backend.aclose()


async def test_radix_setting_is_recorded_and_a_mismatch_refused(make_service: Any) -> None:
    await make_service(enable_radix_tree=True)
    with pytest.raises(MooncakeError) as exc:
        await make_service(enable_radix_tree=False)
    assert exc.value.code == ErrorCode.INVALID_VERSION
    assert "enable_radix_tree" in exc.value.message
    with pytest.raises(MooncakeError) as exc:
        await make_service(enable_radix_tree=True, num_shards=16)
    assert exc.value.code == ErrorCode.INVALID_VERSION


async def test_a_namespace_of_another_schema_version_is_refused_with_what_to_do(
    make_service: Any, backend_url: str
) -> None:
    """Issue 13 item 4: a namespace written by the previous layout (schema 2) is refused by a
    worker and by the read-only tools, with the way out in the message; nothing is rewritten."""
    svc = await make_service()
    ns = svc.config.namespace
    meta = svc.keys.global_key("meta")
    await svc.backend.client.hset(meta, "schema_version", SCHEMA_VERSION - 1)
    cfg = Config(namespace=ns, redis_url=backend_url, num_shards=8)
    for create in (True, False):  # a worker, then fsck/inspect's read-only open
        with pytest.raises(MooncakeError) as exc:
            await MasterService.from_url(backend_url, cfg, create=create)
        assert exc.value.code == ErrorCode.INVALID_VERSION
        msg = exc.value.message
        assert f"schema_version={SCHEMA_VERSION - 1}" in msg and "drop the namespace" in msg
        assert "another namespace name" in msg and f"{{{ns}:*" in msg
    assert await svc.backend.client.hget(meta, "schema_version") == str(SCHEMA_VERSION - 1).encode()


async def test_fsck_and_inspect_write_nothing(make_service: Any, backend_url: str) -> None:
    ns = "t" + uuid.uuid4().hex[:12]
    cfg = Config(namespace=ns, redis_url=backend_url)
    with pytest.raises(MooncakeError) as exc:
        await MasterService.from_url(backend_url, cfg, create=False)
    assert exc.value.code == ErrorCode.OBJECT_NOT_FOUND and "does not exist" in exc.value.message
    # The CLI says so and exits non-zero, and the namespace is still absent.
    for cmd, *rest in (
        ["fsck"],
        ["fsck", "--json"],
        ["inspect", "stats"],
        ["inspect", "node", h(1)],
    ):
        argv = [cmd, "--redis-url", backend_url, "--namespace", ns, *rest]
        code = await asyncio.to_thread(cli_main, argv)
        assert code != 0, argv
    # another namespace's service, only to look at the keys of `ns`
    svc = await make_service(enable_radix_tree=True, num_shards=8)
    client = svc.backend.client
    pattern = "{" + ns + ":*"
    keys = [k async for k in client.scan_iter(match=pattern, count=1000)]
    assert keys == [], keys
    # On an existing namespace, fsck and inspect leave every key as it was.
    await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
    a, b = h("ro-a"), h("ro-b")
    for key, parent in ((a, ""), (b, a)):
        await svc.put_start("c", key, [64], ReplicateConfig(parent_block_hash=parent))
        await svc.put_end("c", key)
    before = await snapshot(svc)
    ns2 = svc.config.namespace
    for cmd, *rest in (
        ["fsck"],
        ["inspect", "stats"],
        ["inspect", "key", b],
        ["inspect", "tree", a],
    ):
        # no --num-shards / --enable-radix-tree: a read-only tool takes the recorded ones
        argv = [cmd, "--redis-url", backend_url, "--namespace", ns2, *rest]
        code = await asyncio.to_thread(cli_main, argv)
        assert code == 0, argv
    ro = await MasterService.from_url(backend_url, Config(namespace=ns2), create=False)
    try:
        assert ro.config.num_shards == 8 and ro.config.enable_radix_tree
        assert (await fsck(ro)).clean
    finally:
        await ro.aclose()
    assert await snapshot(svc) == before


@pytest.fixture
async def plain_redis() -> AsyncIterator[RedisProcess]:
    """A throwaway Redis without persistence: a restart comes back empty."""
    server = RedisProcess(free_port(), Path(tempfile.mkdtemp(prefix="mcr-meta-")), [])
    server.start()
    try:
        yield server
    finally:
        server.stop(kill=True)


async def _restart(server: RedisProcess) -> None:
    server.stop(kill=True)
    await asyncio.to_thread(server.start)


async def test_meta_is_recorded_again_after_an_empty_restart(plain_redis: RedisProcess) -> None:
    url = plain_redis.url
    big = await MasterService.from_url(url, Config(namespace="m", num_shards=64, redis_url=url))
    try:
        await _restart(plain_redis)
        # The running 64-shard worker's next tick records its settings again ...
        await big.heartbeat()
        # ... so a process with another shard count is refused, as before the restart.
        with pytest.raises(MooncakeError) as exc:
            await MasterService.from_url(url, Config(namespace="m", num_shards=8, redis_url=url))
        assert exc.value.code == ErrorCode.INVALID_VERSION
        # A ping records them too.
        await _restart(plain_redis)
        assert (await big.ping("c")).client_status == "NEED_REMOUNT"
        with pytest.raises(MooncakeError):
            await MasterService.from_url(url, Config(namespace="m", num_shards=8, redis_url=url))
        # If the other process came first, the running worker stops serving at its next tick.
        await _restart(plain_redis)
        small = await MasterService.from_url(
            url, Config(namespace="m", num_shards=8, redis_url=url)
        )
        await small.aclose()
        with pytest.raises(MooncakeError) as exc:
            await big.heartbeat()
        assert exc.value.code == ErrorCode.INVALID_VERSION
        with pytest.raises(MooncakeError) as exc:
            await big.exist_key(h("x"))
        assert exc.value.code == ErrorCode.INVALID_VERSION
    finally:
        await big.aclose()


async def test_first_cross_shard_put_after_a_restart_succeeds() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcr-aof-"))
    server = RedisProcess(free_port(), workdir, ["--appendonly", "yes", "--appendfsync", "always"])
    server.start()
    url = server.url
    svc = await MasterService.from_url(
        url, Config(namespace="r", num_shards=8, enable_radix_tree=True, redis_url=url)
    )
    try:
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 20), "c")
        parent = next(hashes_in_shard(svc, 1, "p"))
        await svc.put_start("c", parent, [64])
        await svc.put_end("c", parent)
        for attempt in range(3):  # the pool holds connections to the old server each time
            await _restart(server)
            await asyncio.sleep(0.6)  # past the worker's segment registry cache
            child = next(hashes_in_shard(svc, 2, f"c{attempt}"))
            # No retry here: the put itself must get through on its first call.
            await svc.put_start("c", child, [64], ReplicateConfig(parent_block_hash=parent))
            await svc.put_end("c", child)
            assert await svc.batch_exist_key([parent, child]) == [True, True]
        assert (await fsck(svc)).clean
    finally:
        await svc.aclose()
        server.stop(kill=True)
