"""What the commands print, through ``main([...])``: the demo summary fits 80 columns without a
wrapped or cut cell, replays name their store and show the time left, bench prints tables and
writes nothing unasked, inspect shows only shards that hold something and times in words, inspect
tree and fsck count depth alike, fsck --repair says what it could not repair and why."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.cli import main
from tests.conftest import _cleanup
from tests.helpers import h

A, B, C = h("A"), h("B"), h("C")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# -- demo and replay ---------------------------------------------------------------------------


def test_demo_fits_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the rich Console of the command is 80 columns wide
    monkeypatch.delenv("MOONCAKE_REDIS_REDIS_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    png = tmp_path / "mooncake-redis-demo.png"  # the default path
    code, out, err = run(capsys, "demo", "--conversations", "4", "--capacities", "30,60")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in out  # no cell cut short
    assert "embedded store" in lines[0]
    rows = [line.split() for line in lines if re.match(r"^\s*\d+\s+(radix|batch-evict)\s", line)]
    # One line per run, every cell whole: capacity, policy, hit %, store hit %, orphans
    # mean / max, refused puts, evicted objects, seconds.
    assert [r[:2] for r in rows] == [["30", "radix"], ["30", "batch-evict"], ["60", "radix"],
                                     ["60", "batch-evict"]]  # fmt: skip
    for r in rows:
        assert len(r) == 11 and r[5] == "/" and r[10] == "s", r
        assert 0 <= float(r[2]) <= 100 and 0 <= float(r[3]) <= 100
    assert png.stat().st_size > 10_000 and "plot written to mooncake-redis-demo.png" in out


def test_replay_names_its_store_and_shows_time_left(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws the progress bar
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = run(capsys, "replay", "--trace", "conversation-500", "--limit", "30",
                         "--redis-url", redis_url, "--capacity-blocks", "200")  # fmt: skip
    assert code == 0, err
    assert f"replay of conversation-500 on {redis_url}" in " ".join(out.split())
    assert re.search(rf"│ store\s+│\s+{re.escape(redis_url)} │", out), out
    assert f"redis on {redis_url}" in err and "left" in err
    code, out, err = run(capsys, "replay", "--trace", "conversation-500", "--limit", "5",
                         "--no-progress", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)[0]["params"]["store"] == "embedded store"


# -- bench -------------------------------------------------------------------------------------


def test_bench_prints_tables_and_writes_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MOONCAKE_REDIS_REDIS_URL", raising=False)
    code, out, err = run(capsys, "bench", "--sections", "roundtrips,memory")
    assert code == 0, err
    assert "skipping memory: it needs Redis INFO memory" in err
    assert "round_trips" in out and "batch_exist_key x128" in out and "{" not in out
    assert list(tmp_path.iterdir()) == []
    code, out, _ = run(capsys, "bench", "--sections", "roundtrips", "--json", "--out", "b.json")
    assert code == 0
    doc = json.loads(out)
    assert doc["roundtrips"]["put_end"] == {"commands": 1, "round_trips": 1}
    assert json.loads((tmp_path / "b.json").read_text())["roundtrips"] == doc["roundtrips"]
    assert doc["redis_url"] == "embedded store"


# -- inspect and fsck --------------------------------------------------------------------------


@pytest.fixture
def chain(backend_url: str) -> Iterator[list[str]]:
    """A -> B -> C stored in a fresh 8-shard namespace; yields the store options."""
    ns = "v" + uuid.uuid4().hex[:10]

    async def go() -> None:
        cfg = Config(redis_url=backend_url, namespace=ns, num_shards=8, enable_radix_tree=True)
        async with await MasterService.from_url(backend_url, cfg) as svc:
            await svc.mount_segment({"id": "s0", "size": 1 << 16}, "cl")
            for key, parent in ((A, ""), (B, A), (C, B)):
                await svc.put_start("cl", key + "_0_k", 100, {"parent_block_hash": parent})
                await svc.put_end("cl", key + "_0_k")
            await svc.ping("cl")

    asyncio.run(go())
    yield [
        "--redis-url",
        backend_url,
        "--namespace",
        ns,
        "--num-shards",
        "8",
        "--enable-radix-tree",
    ]
    _cleanup(backend_url, ns)


def test_inspect_stats_shows_what_holds_something(
    chain: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "inspect", "stats", *chain)
    assert code == 0, err
    assert "evictor lease: none (no evictor has run in this namespace yet)" in out
    assert run(capsys, "evictor", "--once", *chain)[0] == 0  # fences every shard
    code, out, _ = run(capsys, "inspect", "stats", "--json", *chain)
    doc = json.loads(out)
    holding = {s["shard"] for s in doc["shards"] if s.get("objects")}
    assert all("fence" in s for s in doc["shards"]) and "fence" not in doc["totals"]
    code, out, _ = run(capsys, "inspect", "stats", *chain)
    assert f"per shard ({len(holding)} of 8 hold something)" in out
    table = out.split("hold something)")[1].split("clients:")[0]
    shown = {int(m) for m in re.findall(r"^│\s+(\d+) │", table, re.M)}
    assert shown == holding
    assert "clients: 1 (1 live)" in out and re.search(r"cl: last ping [\d.]+ m?s ago \(live\)", out)
    lease = next(line for line in out.splitlines() if line.startswith("evictor lease:"))
    assert re.fullmatch(r"evictor lease: free \(released by its last holder, epoch \d+\)", lease)
    assert not re.search(r"\d{13}", lease.split("epoch")[0])  # epochs are Redis ms by design


def test_inspect_key_has_a_legend(chain: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", "key", B + "_0_k", *chain)
    assert code == 0
    flat = " ".join(out.split())
    assert "S C state: P put in progress, C complete" in flat
    assert "z 100 size in bytes" in flat
    assert re.search(r"w \d{13} \([\d.]+ m?s ago\) put started", flat), flat
    # the allocation bucket's command as redis-cli needs it (rich would print ":a:" as an emoji)
    assert re.search(r"HMGET '\{[^}]+\}:a:0' ", flat), flat


def test_tree_and_fsck_count_depth_alike(
    chain: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", "tree", A, *chain)
    assert code == 0 and "3 nodes, 3 keys, depth 3 " in out
    code, out, _ = run(capsys, "fsck", *chain)
    assert code == 0 and "max depth 3 (nodes on the longest chain from a root)" in out
    code, out, _ = run(capsys, "fsck", "--json", *chain)
    assert json.loads(out)["counts"]["max_depth"] == 3


def test_fsck_repair_says_what_it_could_not_repair(
    backend_url: str, chain: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from mooncake_redis.keys import HASH_FIELDS, KeySchema, node_child_field

    ns = chain[chain.index("--namespace") + 1]
    keys = KeySchema(ns, 8)
    ghost = h("ghost")

    async def dangle() -> None:  # a fresh dangling edge: a link may be in progress
        cfg = Config(redis_url=backend_url, namespace=ns, num_shards=8, enable_radix_tree=True)
        async with await MasterService.from_url(backend_url, cfg) as svc:
            now = await svc.backend.time_ms()
            node = keys.node(keys.shard_of(B), B)
            await svc.backend.client.hset(node, node_child_field(ghost), now)
            await svc.backend.client.hincrby(node, HASH_FIELDS["node"]["nchildren"], 1)

    asyncio.run(dangle())
    code, out, _ = run(capsys, "fsck", "--repair", *chain)
    flat = " ".join(out.split())
    assert code == 1
    assert "not repaired dangling_edge" in flat
    assert "why: younger than the grace period (60000 ms)" in flat
    assert "not clean: could not repair 1 of 1 problems (dangling_edge 1); repaired 0" in flat
    code, out, _ = run(capsys, "fsck", "--repair", "--json", *chain)
    doc = json.loads(out)
    assert code == 1 and (doc["repaired"], doc["not_repaired"], doc["clean"]) == (0, 1, False)
    time.sleep(0.01)
    code, out, _ = run(capsys, "fsck", "--repair", "--grace-ms", "0", *chain)
    assert code == 0 and "clean after repairing 1 problems" in out
    code, out, _ = run(capsys, "fsck", *chain)
    assert code == 0 and out.rstrip().endswith("clean")


def test_bundled_trace_slice_replays_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "replay", "--trace", "conversation-500", "--target", "model",
                         "--capacity-blocks", "2000", "--json")  # fmt: skip
    assert code == 0, err
    (res,) = json.loads(out)
    assert res["requests"] == 500 and res["references"] == 14_162
    code, out, _ = run(capsys, "replay", "--help")
    assert code == 0 and "conversation-500" in out
