"""The Mooncake wire front end: the codec alone (``codec``), and the real, unchanged client
against the real master and against one and three of our workers on one Redis, in the same run
(``wire``), with our rates as ratios of the master's."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..config import Config
from ..server.fleet import WorkerFleet, free_port
from ..service import MasterService
from ..wire.rpc_table import RPCS
from ..wire.types import BufferDescriptor, MemoryDescriptor, ReplicaDescriptor
from .common import check_answers, drop_namespace


def _per_call_us(fn: Callable[[], Any], min_s: float = 0.5) -> float:
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(100):
            fn()
        n += 100
        dt = time.perf_counter() - t0
        if dt >= min_s:
            return dt / n * 1e6


def bench_codec() -> dict[str, Any]:
    """Encoding a 128-key BatchPutStart reply and decoding a 128-key BatchExistKey request,
    with and without type literals, checked to round-trip first."""
    reply = [
        [ReplicaDescriptor(
            i, MemoryDescriptor(BufferDescriptor(4096, 0x7F00_0000_0000 + i * 4096, "tcp",
                                                 "127.0.0.1:18316")), 2)]
        for i in range(128)
    ]  # fmt: skip
    keys = [f"{i:064x}" for i in range(128)]
    put, exist = RPCS["BatchPutStart"].response, RPCS["BatchExistKey"].request
    assert exist is not None
    out: dict[str, Any] = {}
    for literal in (True, False):
        tag = "with literal" if literal else "no literal"
        body = put.encode(reply, literal)
        assert put.decode(body) == reply
        req = exist.encode((keys, "default"), literal)
        assert exist.decode(req) == (keys, "default")
        enc = _per_call_us(partial(put.encode, reply, literal))
        dec = _per_call_us(partial(exist.decode, req))
        out[f"encode BatchPutStart reply x128 ({tag})"] = {
            "us": round(enc, 1), "bytes": len(body), "keys_per_s": round(128 / enc * 1e6)
        }  # fmt: skip
        out[f"decode BatchExistKey request x128 ({tag})"] = {
            "us": round(dec, 1), "bytes": len(req), "keys_per_s": round(128 / dec * 1e6)
        }  # fmt: skip
    return out


def _client(rpc: str, metadata: str, seconds: float) -> dict[str, float]:
    env = {"MC_TCP_BIND_ADDRESS": "127.0.0.1", "GLOG_minloglevel": "2", **os.environ}
    proc = subprocess.run(
        [sys.executable, "-m", "mooncake_redis.bench.wire_client", rpc, metadata,
         "--seconds", str(seconds)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"client against {rpc} failed: {proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _real_master(seconds: float) -> dict[str, float]:
    from ..replay.mooncake_target import MooncakeMaster
    from ..replay.target import TargetOptions

    with tempfile.TemporaryDirectory() as tmp:
        master = MooncakeMaster(TargetOptions(), Path(tmp))
        try:
            master.wait_ready()
            return _client(master.rpc_address, master.metadata_url, seconds)
        finally:
            master.stop()


async def _ours(url: str, workers: int, seconds: float, num_shards: int = 0) -> dict[str, float]:
    ns = "bw" + uuid.uuid4().hex[:8]
    cfg = Config(redis_url=url, namespace=ns, enable_radix_tree=True, num_shards=num_shards)
    svc = await MasterService.from_url(url, cfg)  # records the namespace before the workers
    fleet = WorkerFleet(url, ns, svc.config.num_shards, workers, mooncake_port=free_port())
    try:
        await fleet.start_all()
        got = await asyncio.to_thread(
            _client, fleet.mooncake_address, fleet.urls[0] + "/metadata", seconds
        )
        return {**got, "num_shards": svc.config.num_shards}
    finally:
        fleet.stop_all()
        await drop_namespace(svc)
        await svc.aclose()


async def bench_hint_cost(url: str, calls: int = 200) -> dict[str, Any]:
    """What parent inference adds, in process: a BatchExistKey over a 128-block path whose
    first 64 blocks are stored (the 64 misses write hints to Redis), then the BatchPutStart of
    the missing 64 through another worker (it reads its first block's hint from Redis). The
    two settings run interleaved, call by call, so other load hits both alike."""
    from ..wire.frontend import WireFrontend
    from ..wire.parents import ParentHints
    from ..wire.types import UUID, ObjectMeta, ReplicateConfig, Segment

    client = UUID(1, 1)
    seg = Segment(UUID(2, 2), "bench:1", 1 << 40, 1 << 30, "bench:1", "tcp", "")
    sides: dict[bool, tuple[MasterService, WireFrontend, WireFrontend]] = {}
    spent = {False: [0.0, 0.0], True: [0.0, 0.0]}
    try:
        for infer in (False, True):
            ns = "bh" + uuid.uuid4().hex[:8]
            cfg = Config(redis_url=url, namespace=ns, enable_radix_tree=True,
                         wire_infer_parents=infer)  # fmt: skip
            svc = await MasterService.from_url(url, cfg)
            fe, other = (WireFrontend(svc, ParentHints(svc, 60_000) if infer else None)
                         for _ in range(2))  # fmt: skip
            sides[infer] = (svc, fe, other)
            await fe.MountSegment((seg, client))
        for n in range(calls):
            keys = [f"{n:08x}{i:056x}" for i in range(128)]
            for infer in (n % 2 == 0, n % 2 == 1):
                _, fe, other = sides[infer]
                stored = await fe.BatchPutStart(
                    (client, keys[:64], [64] * 64, ReplicateConfig(), "default")
                )
                assert all(isinstance(r, list) for r in stored), stored[:2]
                ended = await fe.BatchPutEnd(
                    (client, [ObjectMeta(k) for k in keys[:64]], 4, "default")
                )
                check_answers("BatchPutEnd", ended, 64, lambda r: r is None)
                t0 = time.perf_counter()
                found = await fe.BatchExistKey((keys, "default"))
                spent[infer][0] += time.perf_counter() - t0
                assert found == [True] * 64 + [False] * 64
                t0 = time.perf_counter()
                res = await other.BatchPutStart(
                    (client, keys[64:], [64] * 64, ReplicateConfig(), "default")
                )
                spent[infer][1] += time.perf_counter() - t0
                assert all(isinstance(r, list) for r in res), res[:2]
            if n == 0:
                top = keys[64]  # the parent of the put's first block is the path's 64th
                node = await sides[True][0].get_keys_by_prefix(top)
                assert node.parent_prefix_hash == keys[63], node
    finally:
        for svc, _, _ in sides.values():
            await drop_namespace(svc)
            await svc.aclose()
    out: dict[str, Any] = {}
    for infer, (ex, put) in spent.items():
        out["inference on" if infer else "inference off"] = {
            "BatchExistKey x128 (64 miss) us": round(ex / calls * 1e6),
            "BatchPutStart x64 on another worker us": round(put / calls * 1e6),
        }
    off, on = spent[False], spent[True]
    out["on / off"] = {"BatchExistKey": round(on[0] / off[0], 3),
                       "BatchPutStart": round(on[1] / off[1], 3)}  # fmt: skip
    return out


def _best(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: max(a[k], b[k]) for k in a}


async def bench_wire(
    url: str, seconds: float = 2.0, rounds: int = 2, num_shards: int = 0
) -> dict[str, Any]:
    """Each side measured ``rounds`` times in alternating order (master, 1, 3, then 3, 1,
    master, ...), best of the rounds: other load on a shared machine hits all sides alike.
    ``num_shards`` 0: the store's default for this Redis."""
    real: dict[str, float] = {}
    one: dict[str, float] = {}
    three: dict[str, float] = {}
    for r in range(rounds):
        order = ("real", "one", "three") if r % 2 == 0 else ("three", "one", "real")
        for side in order:
            if side == "real":
                got = await asyncio.to_thread(_real_master, seconds)
                real = _best(real, got) if real else got
            elif side == "one":
                got = await _ours(url, 1, seconds, num_shards)
                one = _best(one, got) if one else got
            else:
                got = await _ours(url, 3, seconds, num_shards)
                three = _best(three, got) if three else got
    out: dict[str, Any] = {"seconds_per_figure": seconds, "rounds": rounds}
    out["num_shards"] = one.pop("num_shards")
    three.pop("num_shards")
    out["parent inference cost"] = await bench_hint_cost(url, 50 if seconds < 1 else 200)
    for metric in real:
        if metric == "objects_written":
            continue
        out[metric] = {
            "real master": round(real[metric]),
            "1 worker": round(one[metric]),
            "3 workers": round(three[metric]),
            "1 worker / master": round(one[metric] / real[metric], 3),
            "3 workers / master": round(three[metric] / real[metric], 3),
        }
    return out
