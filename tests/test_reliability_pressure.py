"""Redis under pressure: its own maxmemory, and commands that time out on the client side.

- Near maxmemory (noeviction) puts and registers fail with a clear Mooncake error
  (NO_AVAILABLE_HANDLE, HTTP 507) while reads, removes, unregisters and eviction keep working
  (their scripts carry allow-oom), and once memory is back puts work again.
- A refused step never leaves half an operation: scripts carry a ``#!lua`` shebang, so Redis
  refuses a write script under OOM before it runs; what the steps before it did is one of the
  states the protocol allows (fsck), which the janitor and ``fsck --repair`` clean up.
- Client-side timeouts (Redis paused with CLIENT PAUSE while a worker with a 50 ms socket
  timeout keeps calling): a script either ran whole or not at all; the worker only loses the
  reply, so the store keeps only allowed states and no acknowledged object is lost.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
import redis

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import ALLOWED_KINDS, fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.testing.probes import complete_objects
from tests.helpers import h
from tests.servers import RedisProcess, free_port, saturate

CFG = dict(
    namespace="pressure",
    num_shards=8,
    enable_radix_tree=True,
    default_kv_lease_ttl_ms=0,
    alloc_commit_deadline_ms=200,
    alloc_reclaim_grace_ms=300,
    put_start_discard_timeout_ms=300,
    put_start_release_timeout_ms=400,
)


def oom(exc: BaseException) -> bool:
    """Redis out of memory is NO_AVAILABLE_HANDLE (HTTP 507), as every other lack of room."""
    return isinstance(exc, MooncakeError) and exc.code == ErrorCode.NO_AVAILABLE_HANDLE


@pytest.fixture
async def small_redis() -> Any:
    port = free_port()
    server = RedisProcess(
        port,
        Path(tempfile.mkdtemp(prefix="mcr-oom-")),
        ["--maxmemory", "3mb", "--maxmemory-policy", "noeviction", "--appendonly", "no"],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop(kill=True)


async def test_puts_fail_clearly_near_maxmemory_while_reads_and_removes_work(
    small_redis: RedisProcess,
) -> None:
    svc = await MasterService.from_url(small_redis.url, Config(**CFG, redis_url=small_redis.url))
    try:
        await svc.mount_segment(Segment("oom-seg", "n", 1 << 40, 1 << 34, "h:1"), "c")
        acked: list[str] = []
        refusal: BaseException | None = None
        parent = ""
        for i in range(200_000):
            key = h(f"fill{i}") + "_" + "x" * 200  # a long MHA-style key: fills Redis sooner
            try:
                await svc.put_start("c", key, [64], ReplicateConfig(parent_block_hash=parent))
                await svc.put_end("c", key)
            except Exception as exc:
                if isinstance(exc, MooncakeError) and "commit deadline" in exc.message:
                    continue  # a stall between reserve and commit (a loaded machine), not OOM
                refusal = exc
                break
            acked.append(key)
            parent = key[:64] if i % 16 else ""
        assert refusal is not None and oom(refusal), repr(refusal)
        assert "maxmemory" in str(refusal) or "memory" in str(refusal).lower(), str(refusal)
        assert len(acked) > 100
        # A refused put may give back the bytes it had reserved; top Redis up to its limit again
        # with plain keys outside the namespace so the next checks run at maxmemory.
        admin = redis.asyncio.Redis(port=small_redis.port)
        fillers = await saturate(admin)
        # Path B registration is refused the same way.
        with pytest.raises(MooncakeError) as exc_info:
            await svc.register_radix_tree_node(h("new-node"), acked[0][:64], [h("new-node")])
        assert oom(exc_info.value)
        # Reads keep working (and grant leases: allow-oom).
        assert await svc.exist_key(acked[5])
        assert (await svc.get_replica_list(acked[6])).replicas
        assert (await svc.get_keys_by_prefix(acked[7][:64])).keys == [acked[7]]
        # Unregister and remove keep working and give memory back.
        assert await svc.unregister_radix_tree_keys([acked[8]]) == 1
        # (-n) // 2 floors: with an odd count, acked[-n // 2:] took one key more than half.
        half = len(acked) // 2
        res = await svc.batch_remove(acked[len(acked) - half :])
        assert all(r is None for r in res), [r for r in res if r][:3]
        # The refused steps left only allowed states; janitor + repair make it clean.
        report = await fsck(svc)
        bad = [p for p in report.problems if p.kind not in ALLOWED_KINDS]
        # acked[8] was unregistered by hand above: its object says rad=1 (expected).
        assert {p.kind for p in bad} <= {"object_not_registered"}, [p.detail for p in bad]
        await svc.remove(acked[8])
        await asyncio.sleep(0.45)
        await svc.run_janitor_once(force=True)
        await fsck(svc, repair=True, grace_ms=-1)
        report = await fsck(svc)
        assert report.clean, report.to_dict()["problems"]
        # With memory back, puts work again and every remaining acknowledged object is there.
        await admin.config_set("maxmemory", "3mb")  # saturate lowered it
        if fillers:
            await admin.delete(*fillers)
        await admin.aclose()
        key = h("after")
        await svc.put_start("c", key, [64])
        await svc.put_end("c", key)
        present = await complete_objects(svc)
        kept = set(acked[: len(acked) - half]) - {acked[8]}
        missing = kept - present.keys()
        diag = {}
        for k in list(missing)[:3]:
            shard = svc.shard_of_key(k)
            diag[k[:16]] = await svc.backend.client.hgetall(svc.keys.obj(shard, k))
        assert not missing, (len(missing), acked.index(next(iter(missing))), len(acked), diag)
    finally:
        await svc.aclose()


async def test_client_timeouts_leave_only_allowed_states(small_redis: RedisProcess) -> None:
    admin = redis.asyncio.Redis(port=small_redis.port)
    await admin.config_set("maxmemory", "0")
    # The namespace and the segment through a service with the usual timeouts (a 50 ms
    # stall of a loaded machine in the set-up is not what this test is about), then the
    # 50 ms client.
    setup = await MasterService.from_url(small_redis.url, Config(**CFG, redis_url=small_redis.url))
    await setup.mount_segment(Segment("to-seg", "n", 1 << 40, 1 << 30, "h:1"), "c")
    await setup.aclose()
    svc = await MasterService.from_url(
        small_redis.url, Config(**CFG, redis_url=small_redis.url), socket_timeout=0.05
    )
    stop = asyncio.Event()

    async def pauser() -> None:
        while not stop.is_set():
            await asyncio.sleep(random.uniform(0.02, 0.08))
            await admin.execute_command("CLIENT", "PAUSE", random.randint(60, 150), "ALL")

    rng = random.Random(7)
    acked: set[str] = set()
    removed: set[str] = set()
    timeouts = 0
    try:
        task = asyncio.create_task(pauser())
        for i in range(120):
            key = h(f"to{i}")
            try:
                if acked and rng.random() < 0.3:
                    victim = rng.choice(sorted(acked))
                    acked.discard(victim)
                    removed.add(victim)  # removed or maybe not: either is fine
                    await svc.remove(victim)
                elif rng.random() < 0.2:
                    await svc.register_radix_tree_node(key, h(f"to{i - 1}"), [key])
                else:
                    parent = h(f"to{i - 1}") if i % 4 else ""
                    cfg = ReplicateConfig(parent_block_hash=parent)
                    await svc.put_start("c", key, [64], cfg)
                    await svc.put_end("c", key)
                    acked.add(key)
            except (redis.TimeoutError, redis.ConnectionError, MooncakeError):
                timeouts += 1
        stop.set()
        await task
        assert timeouts > 10, "the pauses did not bite"
        await svc.aclose()
        svc = await MasterService.from_url(
            small_redis.url, Config(**CFG, redis_url=small_redis.url)
        )
        report = await fsck(svc)
        bad = [p for p in report.problems if p.kind not in ALLOWED_KINDS]
        assert not bad, [f"{p.kind}: {p.detail}" for p in bad]
        await asyncio.sleep(0.45)
        await svc.run_janitor_once(force=True)
        await fsck(svc, repair=True, grace_ms=-1)
        report = await fsck(svc)
        assert report.clean, report.to_dict()["problems"]
        present = await complete_objects(svc)
        assert acked <= present.keys(), sorted(acked - present.keys())[:5]
    finally:
        stop.set()
        await svc.aclose()
        await admin.aclose()
