"""A slice of the conversation trace (tests/data: its first 150 requests) through the real,
unchanged Mooncake client against three of our workers behind the wire protocol, parent
inference on, capacity small enough to evict: no orphan and no incomplete block at any sample,
the counts add up, fsck is clean; and the same client against the real master, side by side."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.cli.replay import add_replay_parser
from mooncake_redis.fsck import fsck
from mooncake_redis.replay import ReplayOptions, TargetOptions, create_target, load_trace, replay
from mooncake_redis.replay.trace import blocks_for
from mooncake_redis.replay.wire_target import FleetMaster
from mooncake_redis.server.fleet import WorkerFleet, free_port
from tests.conftest import _cleanup
from tests.test_wire_real_client import CLIENT_ENV

SLICE = Path(__file__).parent / "data" / "conversation_trace_head150.jsonl"


@pytest.fixture
def client_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in CLIENT_ENV.items():  # the client runs in this process here
        monkeypatch.setenv(k, v)


async def test_trace_slice_through_the_real_client_and_three_workers(
    redis_url: str, client_ports: None
) -> None:
    recs = load_trace(str(SLICE))
    assert len(recs) == 150
    ns = "tr" + uuid.uuid4().hex[:10]  # ours, so the target leaves it for fsck
    opts = TargetOptions(capacity_blocks=600, policy="radix", redis_url=redis_url, workers=3,
                         extra={"namespace": ns})  # fmt: skip
    target: Any = await create_target("wire", opts)
    try:
        res = await replay(recs, target, ReplayOptions(progress=False, sample_every=10))
        side = target.master
        assert isinstance(side, FleetMaster)
        f = side.fleet
        f.stop_all()  # fsck reads shard by shard: no evictor may run under it
        cfg = Config(redis_url=f.redis_url, namespace=f.namespace, num_shards=f.num_shards,
                     enable_radix_tree=True)  # fmt: skip
        svc = await MasterService.from_url(f.redis_url, cfg)
        try:
            report = await fsck(svc)
            stored = sorted(await svc.complete_objects())
            nodes = await svc.get_nodes(stored)
        finally:
            await svc.aclose()
    finally:
        await target.close()
        _cleanup(redis_url, ns)
    # The parents the front end inferred are the trace's, or none (a put batch that began at
    # the start of an exists call: docs/wire.md); never another block.
    truth = {b.hash: b.parent_hash for r in recs for b in blocks_for(r, "mla", 1)}
    got = {k: n.parent_prefix_hash for k, n in zip(stored, nodes) if n is not None}
    assert len(got) == len(stored) > 0
    wrong = [k for k, p in got.items() if p and p != truth[k]]
    assert wrong == []
    inferred = sum(1 for k, p in got.items() if p and p == truth[k])
    assert inferred >= 0.9 * sum(1 for k in got if truth[k]), (inferred, len(got))
    assert res.references == sum(len(r.hash_ids) for r in recs)
    assert res.hits + res.misses == res.references
    assert res.puts_ok > 0 and res.evicted_keys > 0  # the capacity forced eviction
    assert res.health["samples"] == 150 // 10 + 1
    assert res.health["orphans_max"] == 0 and res.health["incomplete_max"] == 0
    assert res.stored_final == res.puts_ok - res.evicted_keys - res.removed
    assert report.clean, [(p.kind, p.node[:12], p.detail) for p in report.problems]


async def test_replay_cli_drives_a_given_master_address(
    redis_url: str, client_ports: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replay --target mooncake --master-address``: the real client against a master it did
    not start (here our worker's coro_rpc port, its /metadata and its admin routes)."""
    fleet = WorkerFleet(redis_url, "tr" + uuid.uuid4().hex[:10], 8, 1, mooncake_port=free_port())
    await fleet.start_all()
    try:
        parser = argparse.ArgumentParser()
        add_replay_parser(parser.add_subparsers())
        url = fleet.urls[0]
        args = parser.parse_args(
            ["replay", "--trace", str(SLICE), "--limit", "40", "--target", "mooncake",
             "--master-address", fleet.mooncake_address, "--metadata-url", url + "/metadata",
             "--master-admin-url", url, "--capacity-blocks", "2000", "--json"]
        )  # fmt: skip
        assert await asyncio.to_thread(args.func, args) == 0
    finally:
        fleet.stop_all()
        _cleanup(redis_url, fleet.namespace)
    (res,) = json.loads(capsys.readouterr().out)
    assert res["puts_ok"] > 0 and res["hits"] + res["misses"] == res["references"]
    assert res["stored_final"] == res["puts_ok"]  # nothing evicted at this capacity
    assert fleet.mooncake_address in res["params"]["policy"]
