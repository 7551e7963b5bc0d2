"""Driver accounting on a tiny fake store, the reference models, the report and the CLI."""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from pathlib import Path

import pytest

from mooncake_redis.cli.replay import add_demo_parser, add_replay_parser
from mooncake_redis.replay import (
    PutItem,
    ReplayOptions,
    ReplayResult,
    ReplayTarget,
    TargetOptions,
    create_target,
    register_target,
    replay,
)
from mooncake_redis.replay.metrics import analyse, percentile
from mooncake_redis.replay.report import plot_capacity, results_json, results_table
from mooncake_redis.replay.synth import SynthConfig, generate
from mooncake_redis.replay.trace import TraceRecord, block_hash, load_trace

TRACE = "/work/shared/traces/conversation_trace.jsonl"


class FakeStore:
    """Dict store, LRU by object count; every 50th put also removes its oldest object."""

    name = "fake"
    value_size = 4096

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.data: OrderedDict[str, str] = OrderedDict()
        self.c = {"evictions": 0, "evicted_keys": 0, "bytes_evicted": 0, "removed": 0}
        self.puts = 0
        self.calls: list[tuple[str, int]] = []

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        self.calls.append(("exist", len(keys)))
        out = [k in self.data for k in keys]
        for k in keys:
            if k in self.data:
                self.data.move_to_end(k)
        return out

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        self.calls.append(("put", len(items)))
        out = []
        for it in items:
            assert len(it.parent_block_hash) in (0, 64)
            if it.key in self.data:
                out.append(False)
                continue
            if len(self.data) >= self.capacity:
                self.data.popitem(last=False)
                self.c["evictions"] += 1
                self.c["evicted_keys"] += 1
                self.c["bytes_evicted"] += it.size
            self.data[it.key] = it.parent_block_hash
            self.puts += 1
            if self.puts % 50 == 0:
                self.data.popitem(last=False)
                self.c["removed"] += 1
            out.append(True)
        return out

    async def batch_get(self, keys: list[str]) -> list[bool]:
        self.calls.append(("get", len(keys)))
        return await self.batch_exist(keys)

    async def stored_keys(self) -> set[str]:
        return set(self.data)

    async def counters(self) -> dict[str, int]:
        return dict(self.c)

    async def close(self) -> None:
        return None


def _check_accounting(r: ReplayResult) -> None:
    assert r.hits + r.misses == r.references
    assert r.host_hits + r.blocks_asked == r.references
    assert r.stored_final == r.puts_ok - r.evicted_keys - r.removed
    assert 0.0 <= r.hit_rate <= 1.0


@pytest.mark.parametrize(
    ("key_format", "tp", "engines"), [("mla", 1, 0), ("mha", 2, 0), ("mla", 1, 3), ("mha", 4, 2)]
)
async def test_counts_add_up_on_fake(key_format: str, tp: int, engines: int) -> None:
    recs = load_trace(TRACE, limit=300)
    store = FakeStore(capacity=800)
    assert isinstance(store, ReplayTarget)
    opts = ReplayOptions(
        key_format=key_format,
        tp=tp,
        engines=engines,
        host_cache_blocks=100,
        sample_every=25,
        progress=False,
    )
    r = await replay(recs, store, opts)
    _check_accounting(r)
    assert r.requests == 300
    assert r.references == sum(len(x.hash_ids) for x in recs)
    assert r.hits > 0 and r.removed > 0 and r.evicted_keys > 0
    assert r.health["samples"] == 300 // 25 + 1
    assert max(n for _, n in store.calls) <= 128  # SGLang batch size
    assert {"batch_exist", "batch_put", "stored_keys"} <= set(r.latency)
    assert ("batch_get" in r.latency) == (r.store_hits > 0)
    if engines:
        assert r.host_hits > 0


async def test_hit_is_consecutive_complete_blocks_and_puts_carry_parents() -> None:
    store = FakeStore(capacity=1000)
    recs = [TraceRecord(0, (1, 2, 3)), TraceRecord(1, (1, 2, 4, 5))]
    r = await replay(recs, store, ReplayOptions(key_format="mha", tp=1, progress=False))
    assert r.store_hits == 2  # blocks 1 and 2 of the second request
    assert r.puts_ok == 2 * 3 + 2 * 2
    assert store.data[f"{block_hash(4)}_0_k"] == block_hash(2)
    assert store.data[f"{block_hash(1)}_0_v"] == ""
    # A block after the first miss is not a hit even if it is stored.
    del store.data[f"{block_hash(1)}_0_k"]
    r2 = await replay([TraceRecord(0, (1, 2))], store, ReplayOptions(key_format="mha"))
    assert r2.store_hits == 0 and r2.puts_ok == 1


def test_analyse_orphans_and_incomplete() -> None:
    a, b, c = block_hash(1), block_hash(2), block_hash(3)
    parents = {a: "", b: a, c: b}
    keys = {f"{b}_0_k", f"{b}_0_v", f"{c}_0_k"}  # a missing: b orphaned; c partial
    s = analyse(keys, parents, 2)
    assert (s.stored, s.orphans, s.incomplete) == (3, 2, 1)
    keys = {f"{b}_0_k", f"{c}_0_k", f"{c}_0_v"}  # b partial: its key and c's are orphans
    s = analyse(keys, parents, 2)
    assert (s.stored, s.orphans, s.incomplete) == (3, 3, 1)
    assert s.orphan_share == 1.0
    assert analyse({a, b}, parents, 1).orphans == 0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0


@pytest.mark.parametrize("policy", ["radix", "batch-evict"])
async def test_model_targets(policy: str) -> None:
    recs = generate(SynthConfig(seed=1, conversations=60))
    t = await create_target("model", TargetOptions(capacity_blocks=300, policy=policy))
    r = await replay(recs, t, ReplayOptions(engines=0, progress=False, sample_every=10))
    _check_accounting(r)
    assert r.stored_final <= 300
    if policy == "radix":  # leaf-first: never an orphan when engines ask for whole chains
        assert r.health["orphans_max"] == 0


async def test_registry_accepts_new_targets() -> None:
    async def factory(options: TargetOptions) -> ReplayTarget:
        return FakeStore(options.capacity_blocks)

    register_target("fake-test", factory)
    t = await create_target("fake-test", TargetOptions(capacity_blocks=5))
    assert isinstance(t, FakeStore) and t.capacity == 5
    with pytest.raises(LookupError, match="available"):
        await create_target("no-such-target", TargetOptions())


async def test_report_outputs(tmp_path: Path) -> None:
    recs = generate(SynthConfig(seed=2, conversations=20))
    results = []
    for cap in (100, 200):
        store = FakeStore(cap)
        results.append(
            await replay(
                recs, store, ReplayOptions(progress=False, params={"capacity_blocks": cap})
            )
        )
    assert results_table(results).row_count > 10
    data = json.loads(results_json(results))
    assert data[0]["hits"] + data[0]["misses"] == data[0]["references"]
    png = plot_capacity(results, tmp_path / "p.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mooncake-redis")
    sub = p.add_subparsers(dest="cmd", required=True)
    add_replay_parser(sub)
    add_demo_parser(sub)
    return p


def test_cli_replay_json_on_model(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(
        ["replay", "--trace", TRACE, "--target", "model", "--limit", "100", "--json",
         "--capacity-blocks", "500", "--engines", "2", "--host-cache-blocks", "50"]
    )  # fmt: skip
    assert args.func(args) == 0
    (res,) = json.loads(capsys.readouterr().out)
    assert res["requests"] == 100 and res["hits"] + res["misses"] == res["references"]


def test_cli_bad_trace_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "hash_ids": [1]}\n{"timestamp": 0}\n')
    args = _parser().parse_args(["replay", "--trace", str(bad), "--target", "model"])
    assert args.func(args) == 2
    assert f"{bad}:2" in capsys.readouterr().err


def test_cli_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "demo.png"
    args = _parser().parse_args(
        ["demo", "--target", "model", "--conversations", "40", "--capacities", "100,200",
         "--plot", str(png)]
    )  # fmt: skip
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    assert [r[:2] for r in rows if r[1:2] in (["radix"], ["batch-evict"]) and r[0].isdigit()] == [
        ["100", "radix"], ["100", "batch-evict"], ["200", "radix"], ["200", "batch-evict"]
    ]  # fmt: skip
    assert png.exists()
