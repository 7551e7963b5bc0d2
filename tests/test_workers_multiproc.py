"""Three worker processes (the third a standby evictor) and a dedicated evictor against one
real Redis and against a Redis Cluster: concurrent puts, gets, exists, registers and removes
through different workers with the Python client, under memory pressure, with the active
evictor killed mid-run.

Afterwards: fsck is clean; every COMPLETE object that disappeared is accounted for by eviction
(the shards' own ``evicted_keys`` counters) or by our removes; "children alive implies parent
alive" holds; the standby worker took the lease over and kept evicting; workers stop
gracefully.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import redis

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.client import AsyncMasterClient
from mooncake_redis.fsck import fsck, load_nodes
from mooncake_redis.keys import KeySchema
from tests.conftest import _cleanup
from tests.helpers import h
from tests.servers import free_port

NUM_SHARDS = 16
OBJ = 1024
SEG_SIZE = 40 * OBJ  # two segments: room for about 80 objects
RUN_S = 5.0
KILL_AT_S = 2.5


@dataclass
class Procs:
    url: str
    namespace: str
    env: dict[str, str]
    workers: list[tuple[subprocess.Popen[bytes], str]] = field(default_factory=list)
    evictors: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def common(self) -> list[str]:
        return ["--redis-url", self.url, "--namespace", self.namespace,
                "--num-shards", str(NUM_SHARDS), "--enable-radix-tree"]  # fmt: skip

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mooncake_redis.cli", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def start_worker(self, evictor: str = "off") -> str:
        port = free_port()
        p = self.spawn("serve", *self.common(), "--port", str(port), "--evictor", evictor,
                       "--fsck-interval", "0", "--log-level", "warning")  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        self.workers.append((p, url))
        return url

    def start_evictor(self) -> subprocess.Popen[bytes]:
        p = self.spawn("evictor", *self.common(), "--check-interval-ms", "10")
        self.evictors.append(p)
        return p

    def wait_ready(self, timeout: float = 90.0) -> None:  # the fleet's: 17-22 s at load 12
        deadline = time.monotonic() + timeout
        for p, url in self.workers:
            while True:
                assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
                try:
                    if httpx.get(url + "/ready", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"{url} not ready"
                time.sleep(0.1)

    def wait_lease_holder(self, pid: int, timeout: float = 60.0) -> None:
        """Until process ``pid`` holds the evictor lease."""
        lease_key = KeySchema(self.namespace, NUM_SHARDS).global_key("evictor")
        client: Any = (
            redis.RedisCluster.from_url(self.url.replace("+cluster", ""))
            if "+cluster" in self.url
            else redis.Redis.from_url(self.url)
        )
        deadline = time.monotonic() + timeout
        try:
            while True:
                holder = client.hget(lease_key, "holder")
                if holder and int(holder.decode().split(":")[1]) == pid:
                    return
                assert time.monotonic() < deadline, f"lease holder {holder!r}, not {pid}"
                time.sleep(0.05)
        finally:
            client.close()

    def kill_all(self) -> None:
        for p in [w for w, _ in self.workers] + self.evictors:
            if p.poll() is None:
                p.kill()
            p.wait(10)


@pytest.fixture
def procs(real_backend_url: str) -> Iterator[Procs]:
    ns = "w" + uuid.uuid4().hex[:10]
    env = dict(os.environ)
    env.update(
        MOONCAKE_REDIS_EVICTION_HIGH_WATERMARK_RATIO="0.8",
        MOONCAKE_REDIS_EVICTION_RATIO="0.2",
        MOONCAKE_REDIS_CLIENT_LIVE_TTL_MS="600000",
        MOONCAKE_REDIS_EVICTOR_LEASE_TTL_MS="1000",
        MOONCAKE_REDIS_DEFAULT_KV_LEASE_TTL_MS="200",
    )
    p = Procs(real_backend_url, ns, env)
    try:
        yield p
    finally:
        p.kill_all()
        _cleanup(real_backend_url, ns)


@dataclass
class Ledger:
    complete: set[str] = field(default_factory=set)  # put_end succeeded
    removed: set[str] = field(default_factory=set)  # removed by us (remove succeeded)
    removed_blocks: set[str] = field(default_factory=set)
    ops: dict[str, int] = field(default_factory=dict)
    no_handle: int = 0

    def count(self, op: str, n: int = 1) -> None:
        self.ops[op] = self.ops.get(op, 0) + n


async def lane(i: int, clients: list[AsyncMasterClient], ledger: Ledger, stop_at: float) -> None:
    rng = random.Random(i)
    cid = f"client-{i % 2}"
    chain: list[str] = []
    while time.monotonic() < stop_at:
        c = clients[rng.randrange(len(clients))]  # any worker serves any request
        if not chain or len(chain) > 12 or rng.random() < 0.05:
            if chain and rng.random() < 0.5:
                # Remove the end of a finished chain (a leaf: this lane never extends it).
                key = chain[-1] + "_0_k"
                try:
                    await c.remove(key, force=True)
                    ledger.removed.add(key)
                    ledger.removed_blocks.add(chain[-1])
                    ledger.count("remove")
                except MooncakeError as exc:
                    assert exc.code in (ErrorCode.OBJECT_NOT_FOUND,), exc
            chain = []
        # Put the next 1-4 blocks of the chain in one batch (parents per key).
        n = rng.randint(1, 4)
        blocks = [h(f"{i}:{uuid.uuid4().hex}") for _ in range(n)]
        parents = [chain[-1] if chain else "", *blocks[:-1]]
        keys = [b + "_0_k" for b in blocks]
        res = await c.batch_put_start(
            cid, keys, [OBJ] * n, [{"parent_block_hash": p} for p in parents]
        )
        ledger.count("batch_put_start")
        started = []
        for k, r in zip(keys, res):
            if isinstance(r, MooncakeError):
                # Full store (the evictor will make room) or a parent evicted meanwhile.
                assert r.code in (ErrorCode.NO_AVAILABLE_HANDLE, ErrorCode.OBJECT_NOT_FOUND), r
                ledger.no_handle += r.code == ErrorCode.NO_AVAILABLE_HANDLE
                break
            started.append(k)
        # Keys after a failed one: revoke what started (their parent chain is broken).
        ok_prefix = started
        extra = [k for k, r in zip(keys, res) if not isinstance(r, MooncakeError)]
        extra = [k for k in extra if k not in ok_prefix]
        if extra:
            await c.batch_put_revoke(cid, extra)
        ends = await clients[rng.randrange(len(clients))].batch_put_end(cid, ok_prefix)
        for k, e in zip(ok_prefix, ends):
            assert e is None, e
            ledger.complete.add(k)
        chain.extend(k[:64] for k in ok_prefix)
        if len(ok_prefix) < n:
            chain = []
            await asyncio.sleep(0.02)
        # Exists over the chain (HiCache style) through another worker, and a get.
        c2 = clients[rng.randrange(len(clients))]
        if chain:
            await c2.batch_exist_key([b + "_0_k" for b in chain])
            ledger.count("batch_exist_key")
            try:
                got = await c2.get_replica_list(chain[-1] + "_0_k")
                assert got.replicas and got.replicas[0].status == "COMPLETE"
            except MooncakeError as exc:
                assert exc.code == ErrorCode.OBJECT_NOT_FOUND, exc  # evicted meanwhile
            ledger.count("get")
        # Path B: register index-only nodes under their own roots.
        if rng.random() < 0.3:
            root, kid = h(f"reg:{i}:{uuid.uuid4().hex}"), h(f"reg:{i}:{uuid.uuid4().hex}")
            res2 = await c2.batch_register_radix_tree_node(
                [(root, "", [root]), (kid, root, [kid + "_0_v"])]
            )
            assert res2 == [None, None], res2
            ledger.count("register", 2)


async def drive(procs: Procs, svc: MasterService) -> dict[str, Any]:
    lease_key = svc.keys.global_key("evictor")
    # the dedicated evictor started first: it takes the lease
    await asyncio.to_thread(procs.wait_lease_holder, procs.evictors[0].pid, 15.0)
    urls = [url for _, url in procs.workers]
    clients = [AsyncMasterClient(u, backoff_s=0.01) for u in urls]
    ledger = Ledger()
    for j in range(2):
        await clients[j].mount_segment(
            {"id": f"seg-{j}", "base": j << 32, "size": SEG_SIZE}, f"client-{j}"
        )
    start = time.monotonic()
    stop_at = start + RUN_S
    lanes = [asyncio.create_task(lane(i, clients, ledger, stop_at)) for i in range(8)]

    async def pinger() -> None:
        while time.monotonic() < stop_at:
            for j in range(2):
                await clients[j].ping(f"client-{j}")
            await asyncio.sleep(0.5)

    lanes.append(asyncio.create_task(pinger()))
    # Kill the evictor holding the lease mid-run; the standby must take over.
    await asyncio.sleep(KILL_AT_S)
    before = {
        k.decode(): v.decode() for k, v in (await svc.backend.client.hgetall(lease_key)).items()
    }
    holder_pid = int(before["holder"].split(":")[1])
    [victim] = procs.evictors
    assert holder_pid == victim.pid, "the dedicated evictor should hold the lease"
    evicted_before_kill = await evicted_total(svc)
    victim.send_signal(signal.SIGKILL)
    victim.wait(5)
    await asyncio.gather(*lanes)
    standby = procs.workers[2][0].pid
    await asyncio.to_thread(procs.wait_lease_holder, standby, 15.0)  # a loaded takeover
    after = {
        k.decode(): v.decode() for k, v in (await svc.backend.client.hgetall(lease_key)).items()
    }
    for c in clients:
        await c.aclose()
    return {
        "ledger": ledger,
        "before": before,
        "after": after,
        "victim": victim.pid,
        "evicted_before_kill": evicted_before_kill,
    }


async def evicted_total(svc: MasterService) -> int:
    total = 0
    for shard in range(NUM_SHARDS):
        v = await svc.backend.client.hget(svc.keys.anchor(shard), "evicted_keys")
        total += int(v or 0)
    return total


async def check_after(procs: Procs, out: dict[str, Any]) -> None:
    cfg = Config(redis_url=procs.url, namespace=procs.namespace, num_shards=NUM_SHARDS,
                 enable_radix_tree=True)  # fmt: skip
    svc = await MasterService.from_url(procs.url, cfg)
    try:
        ledger: Ledger = out["ledger"]
        # Let the new evictor finish whatever a dead one left (journaled unlinks), then check.
        report = None
        for _ in range(40):
            report = await fsck(svc)
            if report.clean:
                break
            await asyncio.sleep(0.25)
        assert report is not None and report.clean, report.to_dict()
        evicted = await evicted_total(svc)
        assert evicted > 0, "memory pressure never made the evictor work"
        assert evicted > out["evicted_before_kill"], "nobody evicted after the kill"
        # The standby took the lease over with a higher epoch.
        assert out["after"]["holder"] != out["before"]["holder"]
        assert int(out["after"]["epoch"]) > int(out["before"]["epoch"])
        standby = procs.workers[2][0].pid
        assert int(out["after"]["holder"].split(":")[1]) == standby
        # Nothing lost: COMPLETE objects not removed by us are there, or were evicted.
        keys = sorted(ledger.complete - ledger.removed)
        present = await svc.batch_exist_key(keys)
        missing = [k for k, p in zip(keys, present) if p is not True]
        assert len(missing) <= evicted, (len(missing), evicted)
        # Children alive implies parent alive (explicit removes may leave a shell).
        nodes = await load_nodes(svc)
        for hsh, node in nodes.items():
            p = node.parent_prefix_hash
            if node.keys and p and p not in ledger.removed_blocks:
                parent = nodes.get(p)
                assert parent is not None and not parent.is_shell, (hsh, p)
        assert ledger.ops.get("batch_put_start", 0) > 20 and ledger.ops.get("register", 0) > 0
    finally:
        await svc.aclose()


def test_three_workers_one_evictor_killed_midrun(procs: Procs) -> None:
    evictor = procs.start_evictor()
    # It holds the lease before the standby starts (else the standby may win the race).
    procs.wait_lease_holder(evictor.pid)
    procs.start_worker()
    procs.start_worker()
    procs.start_worker(evictor="auto")  # the standby: competes for the evictor lease
    procs.wait_ready()

    async def main() -> dict[str, Any]:
        cfg = Config(redis_url=procs.url, namespace=procs.namespace, num_shards=NUM_SHARDS,
                     enable_radix_tree=True)  # fmt: skip
        svc = await MasterService.from_url(procs.url, cfg)
        try:
            return await drive(procs, svc)
        finally:
            await svc.aclose()

    out = asyncio.run(main())
    asyncio.run(check_after(procs, out))
    # Metrics on any worker show the shared figures.
    text = httpx.get(procs.workers[0][1] + "/metrics", timeout=5).text
    assert "master_evicted_key_count" in text and "master_batch_put_start_requests_total" in text
    # Graceful shutdown: SIGTERM, the worker drains and exits by itself (uvicorn re-raises the
    # signal after its shutdown, hence -SIGTERM rather than 0).
    for p, _ in procs.workers:
        p.send_signal(signal.SIGTERM)
    for p, _ in procs.workers:
        assert p.wait(20) in (0, -signal.SIGTERM)
        err = p.stderr.read().decode() if p.stderr else ""
        assert "Traceback" not in err, err
