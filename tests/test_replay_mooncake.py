"""Side by side against the real Mooncake master (the `mooncake` extra; CI installs it).

These tests fail, not skip, when the master cannot start: a silent skip would hide a broken peer.
"""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from mooncake_redis.cli.replay import add_replay_parser
from mooncake_redis.cli.replay_run import default_target
from mooncake_redis.replay import ReplayOptions, TargetOptions, create_target, load_trace, replay
from mooncake_redis.replay.mooncake_target import (
    MooncakeMaster,
    MooncakeTarget,
    MooncakeUnavailable,
    segment_value_size,
)

TRACE = "/work/shared/traces/conversation_trace.jsonl"


async def test_side_by_side_short_replay() -> None:
    recs = load_trace(TRACE, limit=200)
    results = []
    master: MooncakeMaster | None = None
    for name in ("mooncake", default_target()):
        opts = TargetOptions(capacity_blocks=1000, policy="batch-evict")
        target = await create_target(name, opts)
        try:
            if name == "mooncake":
                assert isinstance(target, MooncakeTarget)
                master = target.master
            r = await replay(recs, target, ReplayOptions(progress=False, sample_every=20))
        finally:
            await target.close()
        results.append(r)
        assert 0.0 < r.hit_rate < 1.0
        assert r.hits + r.misses == r.references
        assert r.puts_ok > 0
        assert r.stored_final > 0
        assert r.evicted_keys > 0  # 200 requests overflow 1000 blocks
        slack = max(5, r.puts_ok // 100)  # a live master may still evict in the background
        assert abs(r.stored_final - (r.puts_ok - r.evicted_keys - r.removed)) <= slack
        assert r.health["samples"] == 200 // 20 + 1
    assert (
        master is not None and master.proc.poll() is not None
    )  # the master is stopped with its target
    mooncake, ours = results
    assert mooncake.references == ours.references


def test_segment_meets_client_minimum() -> None:
    size = segment_value_size(TargetOptions(capacity_blocks=1000, objects_per_block=1))
    assert size % 4096 == 0 and size * 1000 >= 16 * 1024 * 1024
    assert segment_value_size(TargetOptions(capacity_blocks=10_000)) == 4096


async def test_missing_package_gives_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mooncake.store", None)
    with pytest.raises(MooncakeUnavailable) as exc:
        await create_target("mooncake", TargetOptions())
    assert "pip install 'mooncake-redis[mooncake]'" in str(exc.value)
    assert "apt-get install libibverbs1" in str(exc.value)


def test_cli_missing_package_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mooncake.store", None)
    p = argparse.ArgumentParser()
    add_replay_parser(p.add_subparsers())
    args = p.parse_args(["replay", "--trace", TRACE, "--target", "mooncake", "--limit", "5"])
    assert args.func(args) == 2
    assert "libibverbs1" in capsys.readouterr().err


def test_cli_replay_mooncake_json(capsys: pytest.CaptureFixture[str]) -> None:
    p = argparse.ArgumentParser()
    add_replay_parser(p.add_subparsers())
    args = p.parse_args(
        ["replay", "--trace", TRACE, "--target", "mooncake", "--limit", "50", "--json",
         "--key-format", "mha", "--tp", "2", "--capacity-blocks", "500"]
    )  # fmt: skip
    assert args.func(args) == 0
    (res,) = json.loads(capsys.readouterr().out)
    assert res["target"] == "mooncake" and res["puts_ok"] > 0
