"""The real, unchanged Mooncake client (``MooncakeDistributedStore``, in subprocesses:
tests/mooncake_driver.py) against our workers' wire front end, and against the real master.

- differential: one scripted sequence of client calls against the real master and against a
  worker; results equal call by call, but for the deliberate differences listed in
  docs/wire.md (each asserted here as what we answer instead);
- two client processes, each using a different worker's /metadata, move data to each other;
- SIGKILL of one of three workers sharing the port while a client puts and gets: the client
  carries on, no acknowledged object is lost, every value reads back intact (md5).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.replay.mooncake_target import MooncakeMaster
from mooncake_redis.replay.target import TargetOptions
from mooncake_redis.server.fleet import WorkerFleet, free_port
from tests.conftest import _cleanup
from tests.mooncake_driver import value

DRIVER = str(Path(__file__).with_name("mooncake_driver.py"))
LEASE_MS = 5000  # leases granted early in the script outlive its slower side on a loaded machine
CLIENT_ENV = {
    # The client binds ports of its own: keep them in this suite's range (docs/wire.md).
    # (an MC_* variable already set wins: sessions sharing one machine take disjoint ranges).
    "MC_TCP_BIND_ADDRESS": "127.0.0.1",
    **{
        name: os.environ.get(name, default)
        for name, default in (
            ("MC_STORE_CLIENT_MIN_PORT", "18300"),
            ("MC_STORE_CLIENT_MAX_PORT", "18319"),
            ("MC_MIN_RPC_PORT", "18320"),
            ("MC_MAX_RPC_PORT", "18339"),
        )
    },
    "GLOG_minloglevel": "2",
    "MC_LOG_LEVEL": "ERROR",
}


def driver(mode: str, rpc: str, metadata: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, DRIVER, mode, rpc, metadata, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **CLIENT_ENV},
    )


def run_script(rpc: str, metadata: str, steps: list[list[Any]]) -> list[list[Any]]:
    proc = driver("script", rpc, metadata)
    out, _ = proc.communicate(json.dumps(steps), timeout=120)
    assert proc.returncode == 0, out
    results: list[list[Any]] = json.loads(out.strip().splitlines()[-1])["results"]
    return results


@pytest.fixture
def real_master() -> Iterator[MooncakeMaster]:
    with tempfile.TemporaryDirectory() as tmp:
        master = MooncakeMaster(TargetOptions(lease_ttl_ms=LEASE_MS), Path(tmp))
        try:
            master.wait_ready()
            yield master
        finally:
            master.stop()


async def _fleet(url: str, n: int, **env: str) -> WorkerFleet:
    ns = "tw" + uuid.uuid4().hex[:10]
    fleet = WorkerFleet(
        url,
        ns,
        8,
        n,
        env={"MOONCAKE_REDIS_DEFAULT_KV_LEASE_TTL_MS": str(LEASE_MS), **env},
        worker_args=["--evictor", "auto"],
        mooncake_port=free_port(),
    )
    await fleet.start_all()
    return fleet


@pytest.fixture
async def one_worker(redis_url: str) -> AsyncIterator[WorkerFleet]:
    fleet = await _fleet(redis_url, 1)
    yield fleet
    fleet.stop_all()
    _cleanup(redis_url, fleet.namespace)


async def fleet_service(fleet: WorkerFleet) -> MasterService:
    """A service on the fleet's namespace; the workers recorded it (radix on): read as recorded."""
    cfg = Config(redis_url=fleet.redis_url, namespace=fleet.namespace, num_shards=fleet.num_shards)
    return await MasterService.from_url(fleet.redis_url, cfg, create=False)


@pytest.fixture
async def three_workers(real_backend_url: str) -> AsyncIterator[WorkerFleet]:
    fleet = await _fleet(real_backend_url, 3)
    yield fleet
    fleet.stop_all()
    _cleanup(real_backend_url, fleet.namespace)


BIG = [f"batch300-{i:03}" for i in range(300)]
ZERO = [f"z{i}" for i in range(8)]
LONG = "L" * 300
SCRIPT: list[list[Any]] = [
    ["put", "k1", 4096, 1],
    ["is_exist", "k1"],
    ["is_exist", "nope"],
    ["get", "k1"],  # grants a lease
    ["remove", "k1"],  # inside the lease
    ["get_size", "k1"],
    ["sleep", LEASE_MS / 1000 + 0.8],
    ["remove", "k1"],  # after it
    ["get", "k1"],
    ["is_exist", "k1"],
    ["get_size", "k1"],
    ["put", "k2", 1000, 2],
    ["put", "k2", 1000, 3],  # a put never overwrites
    ["get", "k2"],
    ["put_batch", ["b0", "b1", "b2"], 2000, 1],
    ["get_batch", ["b0", "nope", "b2"]],
    ["batch_is_exist", ["b0", "nope", "b1", "b2"]],
    ["batch_put_from", ZERO, 8192, 1],
    ["batch_get_into", ["z0", "nope", "z7"], 8192],
    ["put", LONG, 100, 1],  # a key over 255 bytes: 2-byte length fields
    ["get", LONG],
    ["batch_put_from", BIG, 256, 2],  # a 300-key batch
    ["batch_is_exist", [*BIG, "nope"]],
    ["batch_get_into", BIG, 256],
    ["put", "oversize", (64 << 20) + 4096, 1],  # larger than the only segment
    ["is_exist", "oversize"],
    ["upsert", "k2", 500, 9],  # another size: new buffers
    ["get", "k2"],
    ["upsert", "k2", 500, 10],  # the same size: in place
    ["get", "k2"],
    ["upsert", "fresh", 300, 1],  # absent: a put
    ["get", "fresh"],
    ["batch_remove", ["b0", "nope"], True],
    ["remove", "b1", True],
    ["remove", "nope"],
    ["remove_all", False],  # skips what the reads above leased
    ["sleep", LEASE_MS / 1000 + 0.8],
    ["remove_all", False],
    ["batch_is_exist", ["k1", "k2", "b0", "b1", "b2", LONG, *ZERO, BIG[0], BIG[-1]]],
]
# Deliberate differences (docs/wire.md): step index -> (real master's answer, ours).
UPSERT = SCRIPT.index(["upsert", "k2", 500, 9])


def expected_differences(real: list[list[Any]]) -> dict[int, Any]:
    """None since phase B (upsert is served as the real master serves it)."""
    return {}


async def test_differential_real_master_and_worker(
    real_master: MooncakeMaster, one_worker: WorkerFleet
) -> None:
    theirs, ours = await asyncio.gather(
        asyncio.to_thread(
            run_script,
            f"127.0.0.1:{real_master.rpc_port}",
            f"http://127.0.0.1:{real_master.http_port}/metadata",
            SCRIPT,
        ),
        asyncio.to_thread(
            run_script,
            one_worker.mooncake_address,
            one_worker.urls[0] + "/metadata",
            SCRIPT,
        ),
    )
    assert len(theirs) == len(ours) == len(SCRIPT)
    allowed = expected_differences(theirs)
    diffs = []
    for i, (step, t, o) in enumerate(zip(SCRIPT, theirs, ours)):
        assert t[0] == o[0] == step[0]
        want = allowed.get(i, t[1])
        if o[1] != want:
            diffs.append((i, step[0], str(step[1:])[:60], t[1], o[1]))
    assert not diffs, "\n".join(map(str, diffs))
    # The deliberate differences are real differences (else they should leave the list).
    for i in allowed:
        assert theirs[i][1] != ours[i][1], (i, SCRIPT[i][0])
    # And the sequence exercised what it meant to: a lease refusal, hits, misses, the batches.
    assert theirs[4][1] == -706 and theirs[7][1] == 0
    assert theirs[22][1] == [1] * 300 + [0]
    assert theirs[SCRIPT.index(["put", "oversize", (64 << 20) + 4096, 1])][1] == -600
    assert [theirs[UPSERT + i][1] for i in (0, 2, 4)] == [0, 0, 0]


async def test_two_clients_through_two_workers_move_data(three_workers: WorkerFleet) -> None:
    """Each client registers its segment through a different worker's /metadata; puts land on
    either segment, so reads and writes cross between the processes over TCP."""
    keys = [f"pair-{i}" for i in range(8)]
    writer_steps: list[list[Any]] = [["put", k, 4096 * (i + 1), 5] for i, k in enumerate(keys)]
    writer_steps.append(["sleep", 15.0])  # keep its segment mounted while the reader reads
    writer = driver("script", three_workers.mooncake_address, three_workers.urls[0] + "/metadata")
    assert writer.stdin is not None
    writer.stdin.write(json.dumps(writer_steps))
    writer.stdin.close()
    # Until the writer's puts are stored (a loaded machine starts a client slowly).
    svc = await fleet_service(three_workers)
    try:
        deadline = time.monotonic() + 60
        while not all(await svc.batch_exist_key(keys)):
            assert writer.poll() is None, "the writer exited before its puts were stored"
            assert time.monotonic() < deadline, "the writer's puts were not stored in 60 s"
            await asyncio.sleep(0.1)
    finally:
        await svc.aclose()
    reads: list[list[Any]] = [["get", k] for k in keys]
    got = await asyncio.to_thread(
        run_script, three_workers.mooncake_address, three_workers.urls[1] + "/metadata", reads
    )
    assert writer.stdout is not None
    out = await asyncio.to_thread(writer.stdout.read)
    assert await asyncio.to_thread(writer.wait, 60) == 0
    wrote = json.loads(out.strip().splitlines()[-1])["results"]
    assert [r[1] for r in wrote[:8]] == [0] * 8
    for (_, res), (i, k) in zip(got, enumerate(keys)):
        data = value(k, 4096 * (i + 1), 5)
        assert res == [len(data), hashlib.md5(data).hexdigest()], k


async def connections(url: str) -> int:
    async with httpx.AsyncClient() as http:
        text = (await http.get(url + "/metrics")).text
    line = next(x for x in text.splitlines() if x.startswith("mooncake_wire_connections "))
    return int(float(line.split()[1]))


async def test_sigkill_one_of_three_workers_under_a_client(three_workers: WorkerFleet) -> None:
    proc = driver(
        "churn", three_workers.mooncake_address, three_workers.urls[2] + "/metadata", "60"
    )
    assert proc.stdout is not None and proc.stdin is not None
    started = await asyncio.to_thread(proc.stdout.readline)
    assert json.loads(started) == {"started": True}
    await asyncio.sleep(2.0)
    # Kill a worker that holds some of the client's pooled connections.
    conns = [await connections(url) for url in three_workers.urls]
    assert sum(conns) >= 2, conns
    k = conns.index(max(conns))
    victim = three_workers.workers[k]
    assert victim is not None
    victim.kill()  # SIGKILL: its connections die mid-call
    victim.wait()
    t_kill = time.monotonic()
    await asyncio.sleep(3.0)
    three_workers.start_worker(k)  # a restart joins the shared port again
    await three_workers.wait_ready(k)
    await asyncio.sleep(2.0)
    proc.stdin.write("stop\n")
    proc.stdin.flush()
    out, _ = await asyncio.to_thread(proc.communicate, None, 120)
    summary = json.loads(out.strip().splitlines()[-1])
    svc = await fleet_service(three_workers)
    try:
        totals = await svc.shard_totals("evicted_keys", "objects")
        lost_state = {k: await svc.batch_exist_key([k]) for k in summary["lost"][:5]}
        stats = await svc.segment_stats()
    finally:
        await svc.aclose()
    summary["evicted"] = totals["evicted_keys"]
    print(
        "churn under a SIGKILL:",
        {k: v for k, v in summary.items() if k not in ("lost", "corrupted")},
    )
    assert summary["lost"] == [] and summary["corrupted"] == [], (
        summary["lost"][:20],
        summary["corrupted"][:20],
        totals,
        lost_state,
        stats,
    )
    assert summary["evicted"] == 0, summary  # so nothing acknowledged left that way either
    assert summary["gets_bad"] == 0, summary
    assert summary["acked"] == summary["puts_ok"] > 200, summary  # it carried on
    # Only calls cut by the kill may fail; the client reconnected to a live worker.
    assert summary["puts_failed"] <= 10, summary
    assert time.monotonic() - t_kill > 3
