"""Replays a slice of the shared trace against our own store (the in-process library on the
real Redis and on the cluster): both policies, MLA and MHA keys, single-tier and tiered. The radix
policy must never show an orphan or an incomplete block at any sample, and the counts must add
up: hits + misses = references, stored = put - evicted - removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mooncake_redis.fsck import fsck
from mooncake_redis.replay.driver import ReplayOptions, replay
from mooncake_redis.replay.redis_target import create_target
from mooncake_redis.replay.target import TargetOptions
from mooncake_redis.replay.target import create_target as create_any_target
from mooncake_redis.replay.trace import load_trace, objects_per_block

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "conversation_trace.jsonl"
if not TRACE.exists():  # a clone next to shared/ (CI) or the work tree
    TRACE = Path("/work/shared/traces/conversation_trace.jsonl")


@pytest.mark.parametrize("policy", ["radix", "batch-evict"])
@pytest.mark.parametrize(("key_format", "tp"), [("mla", 1), ("mha", 2)])
@pytest.mark.parametrize("engines", [0, 3])
async def test_slice_replay(
    real_backend_url: str, policy: str, key_format: str, tp: int, engines: int
) -> None:
    records = load_trace(TRACE, limit=80)
    per_block = objects_per_block(key_format, tp)
    target = await create_target(
        TargetOptions(
            capacity_blocks=300,
            objects_per_block=per_block,
            value_size=1024,
            policy=policy,
            redis_url=real_backend_url,
            lease_ttl_ms=50,
            extra={"num_shards": "16"},
        )
    )
    try:
        result = await replay(
            records,
            target,
            ReplayOptions(
                key_format=key_format,
                tp=tp,
                engines=engines,
                host_cache_blocks=80 if engines else 0,
                sample_every=10,
                progress=False,
                seed=1,
            ),
        )
        assert result.hits + result.misses == result.references > 0
        assert result.evicted_keys > 0, "the slice must put the store under pressure"
        assert result.stored_final == result.puts_ok - result.evicted_keys - result.removed
        assert len(await target.stored_keys()) == result.stored_final
        if policy == "radix":
            assert result.health["orphans_max"] == 0
            assert result.health["incomplete_max"] == 0
        report = await fsck(target.svc)
        assert report.clean, report.to_dict()["kinds"]
    finally:
        await target.close()


@pytest.mark.parametrize("where", ["embedded", "redis"])
async def test_slice_replay_through_workers(where: str, redis_url: str) -> None:
    """``--workers 2``: two worker processes over HTTP, evicting in the background through the
    shared coordinator; the embedded store is served to them over TCP."""
    records = load_trace(TRACE, limit=60)
    target = await create_target(
        TargetOptions(
            capacity_blocks=300,
            value_size=1024,
            policy="radix",
            redis_url=None if where == "embedded" else redis_url,
            workers=2,
            lease_ttl_ms=50,
            extra={"num_shards": "8"},
        )
    )
    assert "2 workers" in target.name
    try:
        result = await replay(records, target, ReplayOptions(sample_every=5, progress=False))
        assert result.hits + result.misses == result.references > 0
        assert result.evicted_keys > 0, "the workers' evictor must have run"
        assert result.evictions > 0
        assert result.stored_final == result.puts_ok - result.evicted_keys - result.removed
        assert result.health["orphans_max"] == 0
        assert result.health["incomplete_max"] == 0
        target.fleet.stop_all()  # fsck reads shard by shard: a live evictor would race it
        report = await fsck(target.svc)
        assert report.clean, report.to_dict()["kinds"]
    finally:
        await target.close()
    assert all(p is None or p.poll() is not None for p in target.fleet.workers)


@pytest.mark.parametrize(("key_format", "tp"), [("mla", 1), ("mha", 2)])
async def test_reference_model_matches_the_store(
    real_backend_url: str, key_format: str, tp: int
) -> None:
    """The policy study ranks policies on the reference model: with leases off, the model's
    lru must make the store's choices (puts refused, hits, evictions), batch for batch."""
    records = load_trace(TRACE, limit=150)
    per_block = objects_per_block(key_format, tp)
    results = []
    for name in ("model", "redis"):
        target = await create_any_target(
            name,
            TargetOptions(
                capacity_blocks=300,
                objects_per_block=per_block,
                value_size=1024,
                redis_url=real_backend_url,
                lease_ttl_ms=0,
                scoring="lru",
                extra={"num_shards": "16"},
            ),
        )
        try:
            results.append(
                await replay(
                    records,
                    target,
                    ReplayOptions(key_format=key_format, tp=tp, sample_every=25, progress=False),
                )
            )
        finally:
            await target.close()
    model, store = results
    assert store.evicted_keys > 0, "the slice must put the store under pressure"
    for field in ("hits", "puts_ok", "puts_failed", "evicted_keys", "stored_final"):
        assert getattr(model, field) == getattr(store, field), field


@pytest.mark.parametrize(
    ("scoring", "key_format", "tp"),
    [
        ("lru", "mla", 1),
        ("tiered", "mla", 1),
        ("tiered", "mha", 2),
        ("tiered:0/1/1.75/0", "mla", 1),
        ("tiered:0.5/1/2/1e9", "mla", 1),
    ],
)
async def test_reference_model_makes_the_stores_choices(
    backend_url: str, scoring: str, key_format: str, tp: int
) -> None:
    """The store (the embedded one too) and the model hold the same blocks at every health
    sample and at the end, and count the same hits, puts and evictions. ``tiered``'s put grace
    is in logical time (blocks evicted, published by each pass), the same in both: the default
    (a fresh leaf put since the last pass waits), and the ends 0 (no grace) and 1e9 (every
    fresh leaf waits until nothing else is left). MHA: a shorter slice (8 keys a block are 4x
    the work, and the embedded store runs the same Lua far slower than Redis)."""
    records = load_trace(TRACE, limit=150 if key_format == "mla" else 80)
    per_block = objects_per_block(key_format, tp)
    results, stored = [], []
    for name in ("model", "redis"):
        target = await create_any_target(
            name,
            TargetOptions(
                capacity_blocks=300,
                objects_per_block=per_block,
                value_size=1024,
                redis_url=backend_url,
                lease_ttl_ms=0,
                scoring=scoring,
                extra={"num_shards": "8"},
            ),
        )
        try:
            results.append(
                await replay(
                    records,
                    target,
                    ReplayOptions(key_format=key_format, tp=tp, sample_every=0, progress=False),
                )
            )
            stored.append(await target.stored_keys())
        finally:
            await target.close()
    model, store = results
    assert store.evicted_keys > 0, "the slice must put the store under pressure"
    for field in ("hits", "puts_ok", "puts_failed", "evicted_keys", "stored_final"):
        assert getattr(model, field) == getattr(store, field), field
    assert stored[0] == stored[1], "the same blocks stored at the end"
    assert store.health["orphans_max"] == 0 == store.health["incomplete_max"]


def test_cli_compare_on_the_store_prints_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``--compare`` on our store (embedded): one row per policy, the same columns as on the
    model (hit rate, orphans, incomplete blocks, evictions)."""
    import argparse

    from mooncake_redis.cli.replay import add_replay_parser

    p = argparse.ArgumentParser(prog="mooncake-redis")
    add_replay_parser(p.add_subparsers(dest="cmd", required=True))
    args = p.parse_args(
        ["replay", "--trace", str(TRACE), "--target", "redis", "--limit", "40",
         "--capacity-blocks", "120", "--lease-ttl-ms", "0", "--compare", "lru,tiered",
         "--no-progress"]
    )  # fmt: skip
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "redis " in line]
    assert [r.split("│")[1].strip() for r in rows] == ["redis lru", "redis tiered"]
    assert all("0.0 / 0" in r for r in rows)  # orphans and incomplete blocks: none
    assert "evictions" in out and "hit rate" in out
