"""Redis restart mid-load, with AOF (appendfsync always and everysec).

A throwaway redis-server with ``--appendonly yes`` serves one MasterService (the object a worker
holds). Writers put chained objects (each under the previous block, so radix links cross shards)
and record every put acknowledged by put_end. Redis is killed with SIGKILL mid-load and restarted
on the same port and directory; the writers keep going. The same service object, never rebuilt,
must reconnect by itself and reload its scripts (EVALSHA NOSCRIPT -> EVAL). Afterwards:
- with ``always`` every acknowledged object is still there and COMPLETE, the tree is intact;
- with ``everysec`` the acknowledged objects missing after the restart are counted and the loss
  window (kill time minus the oldest missing acknowledgement) is measured;
- after the janitor and ``fsck --repair`` (puts cut in half by the kill), fsck is clean.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.errors import ErrorCode, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.testing.probes import complete_objects
from tests.helpers import h
from tests.servers import RedisProcess, free_port

CFG = dict(
    namespace="restart",
    num_shards=8,
    enable_radix_tree=True,
    default_kv_lease_ttl_ms=0,
    alloc_commit_deadline_ms=200,
    alloc_reclaim_grace_ms=300,
    put_start_discard_timeout_ms=300,
    put_start_release_timeout_ms=400,
)
FIGURES = os.environ.get("MCR_RELIABILITY_FIGURES")  # append a JSON line per run when set


@dataclass
class Load:
    acked: dict[str, float] = field(default_factory=dict)  # key -> ack time (monotonic)
    errors: int = 0
    ops: int = 0
    first_error: str = ""
    ok_after_restart: int = 0
    restarted: bool = False


async def writer(svc: MasterService, load: Load, wid: int, stop: asyncio.Event) -> None:
    parent = ""
    i = 0
    while not stop.is_set():
        key = h(f"w{wid}-{i}")
        try:
            cfg = ReplicateConfig(parent_block_hash=parent)
            await svc.put_start("writer", key, [512], cfg)
            await svc.put_end("writer", key)
            load.acked[key] = time.monotonic()
            load.ops += 1
            if load.restarted:
                load.ok_after_restart += 1
            parent = key if i % 8 else ""  # chains of 8 blocks
            i += 1
        except Exception as exc:  # connection refused/reset while Redis is down
            load.errors += 1
            load.first_error = load.first_error or f"{type(exc).__name__}: {exc}"
            i += 1  # a fresh key: the failed one may be half written
            parent = ""
            await asyncio.sleep(0.02)


async def run_restart(fsync: str, seconds_before: float = 1.5) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"mcr-aof-{fsync}-"))
    args = ["--appendonly", "yes", "--appendfsync", fsync, "--maxmemory-policy", "noeviction"]
    port = free_port()
    server = RedisProcess(port, workdir, args)
    server.start()
    svc = await MasterService.from_url(server.url, Config(**CFG, redis_url=server.url))
    try:
        await svc.mount_segment(Segment("aof-seg", "n", 1 << 40, 64 << 20, "h:1"), "writer")
        load = Load()
        stop = asyncio.Event()
        tasks = [asyncio.create_task(writer(svc, load, w, stop)) for w in range(4)]
        await asyncio.sleep(seconds_before)
        acked_before = len(load.acked)
        killed_at = time.monotonic()
        server.stop(kill=True)  # SIGKILL
        await asyncio.sleep(0.5)
        server = RedisProcess(port, workdir, args)
        server.start()  # same port and dir: the AOF is replayed
        restarted_at = time.monotonic()
        load.restarted = True
        deadline = time.monotonic() + 15
        while load.ok_after_restart < 50 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*tasks)
        assert load.ok_after_restart >= 50, f"no progress after the restart: {load.first_error}"
        sha = svc.backend.scripts["put_start"].sha(True)
        assert (await svc.backend.client.script_exists(sha)) == [True]  # reloaded by itself
        present = await complete_objects(svc)
        missing = {k: t for k, t in load.acked.items() if k not in present}
        window_ms = round((killed_at - min(missing.values())) * 1000) if missing else 0
        # Puts cut in half by the kill: the janitor and fsck --repair clean them up.
        await asyncio.sleep(0.45)
        await svc.run_janitor_once(force=True)
        await fsck(svc, repair=True, grace_ms=-1)
        report = await fsck(svc)
        assert report.clean, report.to_dict()["problems"]
        figures = {
            "test": "redis_restart",
            "appendfsync": fsync,
            "acked_before_kill": acked_before,
            "acked_total": len(load.acked),
            "ops": load.ops,
            "errors_during_outage": load.errors,
            "lost_acked": len(missing),
            "loss_window_ms": window_ms,
            "recovery_s": round(restarted_at - killed_at, 2),
            "first_error": load.first_error[:120],
            "fsck": report.counts,
        }
        if FIGURES:
            with open(FIGURES, "a") as f:
                f.write(json.dumps(figures) + "\n")
        return figures
    finally:
        await svc.aclose()
        server.stop(kill=True)


async def test_restart_with_appendfsync_always_loses_nothing() -> None:
    fig = await run_restart("always")
    assert fig["lost_acked"] == 0, fig
    assert fig["acked_before_kill"] > 20, fig


async def test_restart_with_appendfsync_everysec_loss_window_is_bounded() -> None:
    """SIGKILL of redis-server keeps what it wrote to the page cache, so the measured window is
    that of a process crash; a host crash may lose up to about 1-2 s (see reliability.md)."""
    fig = await run_restart("everysec")
    assert fig["loss_window_ms"] <= 2000, fig


async def test_restart_without_persistence_asks_clients_to_remount() -> None:
    """A Redis that comes back empty: workers keep serving (no crash, no stale cache trusted
    for long), ping tells the client to remount, and after the remount puts work again."""
    workdir = Path(tempfile.mkdtemp(prefix="mcr-nopersist-"))
    port = free_port()
    server = RedisProcess(port, workdir, ["--appendonly", "no"])
    server.start()
    svc = await MasterService.from_url(server.url, Config(**CFG, redis_url=server.url))
    seg = Segment("np-seg", "n", 1 << 40, 1 << 20, "h:1")
    try:
        await svc.mount_segment(seg, "c")
        assert (await svc.ping("c")).client_status == "OK"
        await svc.put_start("c", h("np0"), [100])
        server.stop(kill=True)
        server = RedisProcess(port, workdir, ["--appendonly", "no"])
        server.start()
        for _ in range(50):  # the first command after the restart may see the old socket die
            try:
                status = (await svc.ping("c")).client_status
                break
            except MooncakeError as exc:  # RPC_FAIL: Redis unreachable
                assert exc.code == ErrorCode.RPC_FAIL, exc
                await asyncio.sleep(0.05)
        assert status == "NEED_REMOUNT"
        await svc.remount_segment([seg], "c")
        await asyncio.sleep(0.6)  # past the worker's segment cache
        await svc.put_start("c", h("np1"), [100])
        await svc.put_end("c", h("np1"))
        assert await svc.exist_key(h("np1"))
    finally:
        await svc.aclose()
        server.stop(kill=True)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("MCR_RELIABILITY_LONG"), reason="long variant: MCR_RELIABILITY_LONG=1"
)
@pytest.mark.parametrize("fsync", ["always", "everysec"])
async def test_restart_long(fsync: str) -> None:
    """Long variant: 20 s of load before the kill."""
    fig = await run_restart(fsync, seconds_before=20)
    if fsync == "always":
        assert fig["lost_acked"] == 0, fig


async def test_calls_fail_with_rpc_fail_while_redis_is_down() -> None:
    """While Redis is unreachable every RPC fails with Mooncake's RPC_FAIL (never a redis-py
    exception), and the same service object works again once Redis is back."""
    workdir = Path(tempfile.mkdtemp(prefix="mcr-down-"))
    port = free_port()
    server = RedisProcess(port, workdir, ["--appendonly", "no"])
    server.start()
    svc = await MasterService.from_url(server.url, Config(**CFG, redis_url=server.url))
    key = h("down-0")
    try:
        await svc.mount_segment(Segment("down-seg", "n", 1 << 40, 1 << 20, "h:1"), "writer")
        await svc.put_start("writer", key, [512], ReplicateConfig())
        await svc.put_end("writer", key)
        server.stop(kill=True)
        calls = [
            svc.exist_key(key),
            svc.get_replica_list(key),
            svc.put_start("writer", h("down-1"), [512], ReplicateConfig()),
            svc.get_keys_by_prefix(key),
            svc.batch_exist_key([key, h("down-2")]),  # a batch fails as a whole
        ]
        for call in calls:
            with pytest.raises(MooncakeError) as e:
                await call
            assert e.value.code == ErrorCode.RPC_FAIL, e.value
            assert "Redis unavailable" in str(e.value)
        server = RedisProcess(port, workdir, ["--appendonly", "no"])
        server.start()  # empty: nothing was persisted
        assert await svc.exist_key(key) is False
    finally:
        server.stop(kill=True)
        await svc.aclose()
