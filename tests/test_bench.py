"""`mooncake-redis bench` on the real Redis, quick sizes: the sections print figures and write
JSON with --out (the figures themselves are judged in docs/benchmarks.md, never by timed
tests)."""

from __future__ import annotations

import json
from pathlib import Path

from mooncake_redis.cli import main


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
