"""`mooncake-redis bench` on the real Redis, quick sizes: the sections print figures and write
JSON with --out (the figures themselves are judged in docs/benchmarks.md, never by timed
tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mooncake_redis.cli import main
from tests.test_wire_real_client import CLIENT_ENV


def test_bench_quick_sections(redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "--redis-url",
            redis_url,
            "--quick",
            "--sections",
            "roundtrips,workers",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    rt = res["roundtrips"]
    assert rt, rt
    figs = res["workers"]["figures"]
    targets = {(f["target"], f["rpc"]) for f in figs}
    for target in ("library", "1 worker", "3 workers"):
        for rpc in ("batch_exist_key", "batch_put_start"):
            assert (target, rpc) in targets
    assert all(f["calls"] > 0 and f["keys_per_s"] > 0 for f in figs), figs
    assert {o["rpc"] for o in res["workers"]["http_overhead"]} == {
        "batch_exist_key",
        "batch_put_start",
    }


def test_bench_wire_sections(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The codec micro-benchmark and the real client against the real master, one worker and
    three, each call checked by the client before it counts."""
    for k, v in CLIENT_ENV.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "bench.json"
    args = ["bench", "--redis-url", redis_url, "--quick", "--sections", "codec,wire"]
    assert main([*args, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert {k.split(" (")[0] for k in res["codec"]} == {
        "encode BatchPutStart reply x128",
        "decode BatchExistKey request x128",
    }
    wire = res["wire"]
    for metric in ("batch_is_exist_128_keys_per_s", "batch_put_from_128x4KiB_keys_per_s",
                   "batch_is_exist_128_block_keys_per_s",
                   "batch_put_from_128x4KiB_block_keys_per_s",
                   "put_4KiB_per_s", "get_4KiB_per_s", "is_exist_per_s"):  # fmt: skip
        row = wire[metric]
        assert row["real master"] > 0 and row["1 worker"] > 0 and row["3 workers"] > 0, row


async def test_bench_prefix_finds_what_the_index_finds(redis_url: str) -> None:
    """The prefix section's SCAN baseline finds each probed block's objects (schema 6: an MLA
    object is in its block hash), or the bench fails before it reports a figure."""
    from mooncake_redis.bench.prefix import bench_prefix

    res = await bench_prefix(redis_url, (300, 600), queries=20, scan_queries=2)
    assert res["300"]["index"]["p50_ms"] > 0 and res["600"]["scan"]["p50_ms"] > 0
    assert res["p50_ratio_large_vs_small"] > 0


async def test_bench_throughput_takes_turns(redis_url: str) -> None:
    """The throughput section runs ours, the naive baseline and (when installed) the real master
    in turn within each round, and reports each ratio's median and spread over the rounds."""
    from mooncake_redis.bench.throughput import _rounds, bench_throughput

    res = await bench_throughput(redis_url, n_batches=10, rounds=5)
    for fmt in ("mla", "mha"):
        row = res[fmt]
        assert row["ours"]["exist_absent_keys_per_s"] > 0 and row["naive"]["put_keys_per_s"] > 0
        for op in ("put", "exist"):
            spread = row["ratio_vs_naive_rounds"][op]
            assert spread["min"] <= row["ratio_vs_naive"][op] == spread["median"] <= spread["max"]
    if isinstance(res["mooncake_master"], dict):
        assert res["ratio_vs_mooncake_mla"]["exist"] > 0

    class Log:
        def __init__(self, name: str, calls: list[tuple[str, str, int]]) -> None:
            self.name, self.calls = name, calls

        async def put(self, batches: list[list[tuple[str, str]]]) -> None:
            self.calls.append(("put", self.name, len(batches)))

        async def exist(self, batches: list[list[tuple[str, str]]]) -> None:
            self.calls.append(("exist", self.name, len(batches)))

    calls: list[tuple[str, str, int]] = []
    runners = {n: Log(n, calls) for n in ("a", "b")}
    secs = await _rounds(runners, {"a": [[]] * 4, "b": [[]] * 4}, rounds=2)
    turns = [("a", "b"), ("b", "a")]  # round 0, then round 1 with the order rotated
    assert [c[:2] for c in calls] == [(op, n) for op in ("put", "exist") for t in turns for n in t]
    assert (
        all(c[2] == 2 for c in calls) and len(secs["a"]["put"]) == 2 and "absent" not in secs["a"]
    )
