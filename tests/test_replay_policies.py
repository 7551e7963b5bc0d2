"""The reference model's leaf cache and its policies: the store's put and eviction pattern, the
tree invariants under every policy, the segmented policies' own rules, and the study's fast path
held equal to the replay driver on the model target."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest

from mooncake_redis.cli.replay import add_replay_parser
from mooncake_redis.replay import ReplayOptions, TargetOptions, create_target, replay
from mooncake_redis.replay.leafcache import LeafCache
from mooncake_redis.replay.policies import make_policy, policy_names
from mooncake_redis.replay.segmented import Arc, S3Fifo, TwoQ
from mooncake_redis.replay.study import simulate
from mooncake_redis.replay.synth import SynthConfig, generate
from mooncake_redis.replay.synth_shapes import shape_names, synthesize
from mooncake_redis.replay.trace import TraceRecord, dump_trace

POLICY_SPECS = [*policy_names(), "lru-freq:100", "lru-refs:0.5", "2q:0.1", "s3fifo:0.2"]


def _cache(capacity: int, policy: str = "lru", **kw: float) -> LeafCache[int]:
    return LeafCache(capacity, make_policy(policy), **kw)


def _check_tree(c: LeafCache[int]) -> None:
    assert c.used == sum(n.objects for n in c.nodes.values()) <= c.capacity
    for n in c.nodes.values():
        assert n.alive
        assert n.parent is None or n.parent.block in c, "a stored block lost its parent"
        kids = sum(1 for m in c.nodes.values() if m.parent is n)
        assert kids == n.children


def test_put_guard_and_reservations_in_order() -> None:
    c = _cache(10)
    assert c.put([(1, None, 1), (2, 1, 1), (3, 99, 1)]) == [True, True, False]
    assert c.c.refused_orphan == 1
    # A chain of 12 more: 8 fit (10 in all), then nothing after the first refusal, and the
    # children of a refused block are refused as orphans; the pass goes back to 9 leaf first.
    chain = [(b, b - 1 if b > 10 else 2, 1) for b in range(10, 22)]
    ok = c.put(chain)
    assert ok == [True] * 8 + [False] * 4
    assert c.used == 9 and 17 not in c and 16 in c  # the deepest block went, nothing else
    assert c.put([(2, 1, 1)]) == [False]  # never overwritten
    _check_tree(c)


def test_pass_after_a_refusal_at_or_below_the_watermark_makes_room() -> None:
    c = _cache(100, eviction_ratio=0.05)
    assert c.put([(b, None, 30) for b in range(3)]) == [True] * 3  # 90 = the watermark: no pass
    assert c.c.evictions == 0
    assert c.put([(3, None, 30)]) == [False]  # no room: down to 85 and at least 5 freed
    assert c.used == 60 and c.c.evictions == 1 and 0 not in c
    # Above the watermark the pass only goes back to it, refusal or not (the store's order).
    c2 = _cache(100)
    assert c2.put([(b, None, 19) for b in range(6)]) == [True] * 5 + [False]
    assert c2.used == 76  # 95 > 90: one block of 19 went, not down to 85 - 5


def test_leased_leaf_is_skipped_then_evictable() -> None:
    c = _cache(4, lease_ttl_ms=1_000, high_watermark=1.0, eviction_ratio=0.25)
    c.now_ms = 0.0
    c.put([(b, None, 1) for b in range(1, 5)])
    c.tick()
    assert c.touch(1)  # leased until 1000 ms
    c.now_ms = 500.0
    assert c.put([(5, None, 1)]) == [False]  # full: the pass skips 1 (leased), takes 2
    assert 1 in c and 2 not in c and c.used == 3
    c.now_ms = 2_000.0
    c.tick()
    c.touch(3)
    assert c.put([(5, None, 1)]) == [True]
    # Lease order: 1's lease ran to 1000 ms, 4 was put at 0 and never leased: 4 goes first.
    assert c.put([(6, None, 1)]) == [False]
    assert 4 not in c and 1 in c and 3 in c


@pytest.mark.parametrize("spec", POLICY_SPECS)
def test_every_policy_keeps_the_store_prefix_closed(spec: str) -> None:
    rng = random.Random(spec)
    c = _cache(60, spec, lease_ttl_ms=0.0)
    parent: dict[int, int | None] = {}
    chains: list[list[int]] = [[]]
    nxt = 0
    for step in range(400):
        base = rng.choice(chains)[: rng.randint(0, 12)]
        new = list(range(nxt, nxt + rng.randint(1, 6)))
        nxt += len(new)
        chain = base + new
        chains.append(chain)
        c.tick()
        for b in chain:
            if not c.touch(b, 2):
                break
        items: list[tuple[int, int | None, int]] = []
        prev: int | None = None
        for b in chain:
            parent.setdefault(b, prev)
            if b not in c:
                items.append((b, prev, 2))
            prev = b
        c.tick()
        c.put(items)
        assert c.used <= int(0.9 * 60) or (c.used <= 60 and step == 0)
        _check_tree(c)
    assert c.c.evicted_blocks > 100


def test_arc_tunes_its_target_on_ghost_hits() -> None:
    arc: Arc[int] = Arc()
    c = LeafCache(10, arc, high_watermark=1.0, eviction_ratio=0.1)
    c.put([(b, None, 1) for b in range(10)])
    c.tick()
    c.touch(9)  # 9 moves to T2
    assert c.put([(10, None, 1)]) == [False]  # full: T1's least recently used leaf (0) goes
    assert 0 not in c and 9 in c and arc.p == 0
    c.put([(0, None, 1)])  # a B1 ghost: T1 deserved more room
    assert arc.p > 0 and c.nodes[0].seg == 1


def test_two_q_admits_a_returning_block_to_its_main_queue() -> None:
    q: TwoQ[int] = TwoQ(kin=0.25)
    c = LeafCache(8, q, high_watermark=1.0, eviction_ratio=0.125)
    c.put([(b, None, 1) for b in range(8)])
    c.tick()
    c.touch(0)  # a hit in A1in does not save it: A1in is FIFO
    c.put([(8, None, 1)])
    assert 0 not in c
    c.put([(0, None, 1)])
    assert 0 in c and c.nodes[0].seg == 1


def test_s3fifo_moves_a_block_hit_in_its_small_queue_to_main() -> None:
    s3: S3Fifo[int] = S3Fifo(small=0.5)
    c = LeafCache(4, s3, high_watermark=1.0, eviction_ratio=0.25)
    c.put([(b, None, 1) for b in range(4)])
    c.tick()
    c.touch(0)
    c.put([(4, None, 1)])
    assert 0 in c and c.nodes[0].seg == 1 and 1 not in c  # 0 went to M, 1 was evicted
    c.put([(1, None, 1)])
    assert c.nodes[1].seg == 1  # a ghost comes back straight to M


def test_make_policy_rejects_unknown_names_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="expected one of"):
        make_policy("nope")
    with pytest.raises(ValueError, match="bad argument"):
        make_policy("lru-refs:many")
    assert make_policy("lru-freq:250").name == "lru-freq"


def _records() -> list[TraceRecord]:
    return generate(SynthConfig(seed=4, conversations=80))


@pytest.mark.parametrize("spec", ["lru", "arc", "s3fifo", "lru-refs"])
@pytest.mark.parametrize(("key_format", "tp"), [("mla", 1), ("mha", 2)])
async def test_study_fast_path_equals_the_driver_on_the_model(
    spec: str, key_format: str, tp: int
) -> None:
    recs = _records()
    per_block = 1 if key_format == "mla" else 2 * tp
    target = await create_target(
        "model",
        TargetOptions(
            capacity_blocks=150, objects_per_block=per_block, scoring=spec, lease_ttl_ms=0
        ),
    )
    r = await replay(recs, target, ReplayOptions(key_format=key_format, tp=tp, progress=False))
    s = simulate(recs, spec, 150, objects_per_block=per_block)
    assert (s.hits, s.references) == (r.hits, r.references)
    assert s.evicted_blocks * per_block == r.evicted_keys > 0
    assert s.orphans_max == 0 == r.health["orphans_max"] == r.health["incomplete_max"]


def test_tiered_evicts_fresh_tails_first_then_exposed_then_found() -> None:
    c = _cache(1_000, "tiered", high_watermark=1.0)
    c.now_ms = 0.0
    c.turnover = 1_000  # as a pass publishes it: protections are fixed at each index event
    # A chain 0-1-2 found once by a later request, then five fresh roots, all newer.
    c.put([(0, None, 1), (1, 0, 1), (2, 1, 1)])
    c.tick()
    for b in (0, 1, 2):
        c.touch(b)
    c.put([(b, None, 1) for b in range(10, 15)])
    c.published_clock = 1  # a pass evicted a block since: the fresh roots are not young now
    policy = c.policy
    order = [policy.pop() for _ in range(3)]
    # Fresh leaves go before the older found one; within a tier, least recently used first.
    assert [n.block for n in order if n is not None] == [10, 11, 12]


def test_tiered_protection_is_bounded_by_its_turnovers() -> None:
    # A found leaf outlives fresh ones by at most FOUND turnovers: with 0 it is plain LRU.
    c = _cache(1_000, "tiered:0/0/0", high_watermark=1.0)
    c.now_ms = -5_000.0
    c.put([(0, None, 1)])
    c.tick()
    c.touch(0)
    c.tick()
    c.put([(1, None, 1)])
    c.now_ms = 0.0
    node = c.policy.pop()
    assert node is not None and node.block == 0
    with pytest.raises(ValueError, match="tiered:FRESH/EXPOSED/FOUND"):
        make_policy("tiered:1/2")
    with pytest.raises(ValueError, match=">= 0"):
        make_policy("tiered:0/1/1/-5")
    with pytest.raises(ValueError, match=">= 0"):
        make_policy("tiered:0/-1/1")


def test_tiered_keeps_a_request_whose_puts_span_batches() -> None:
    """The newest block of a put batch is a fresh leaf; the next batch of the same request
    extends it. Within the grace it is not a victim while an older leaf is, so the request is
    stored whole instead of being refused as orphans after the pass between its batches."""
    c = _cache(40, "tiered", high_watermark=0.9)
    c.now_ms = 0.0
    c.put([(b, None, 1) for b in range(30)])
    c.tick()
    for b in range(30):  # old roots, found since: protected well above a fresh leaf
        c.touch(b)
    c.now_ms = 10_000.0
    chain = list(range(100, 120))
    for i in range(0, len(chain), 4):  # 4 blocks per batch, a pass after each
        part = chain[i : i + 4]
        ok = c.put([(b, b - 1 if b > 100 else None, 1) for b in part])
        assert ok == [True] * len(part)
    assert all(b in c for b in chain) and c.c.refused_orphan == 0
    assert c.used <= 36
    _check_tree(c)


@pytest.mark.parametrize("shape", shape_names())
def test_synthetic_shapes_are_seeded_trees(shape: str) -> None:
    recs = synthesize(shape, seed=3, scale=0.05)
    assert recs == synthesize(shape, seed=3, scale=0.05)
    assert recs != synthesize(shape, seed=4, scale=0.05)
    ts = [r.timestamp_ms for r in recs]
    assert ts == sorted(ts) and len(recs) > 20
    parent: dict[int, int | None] = {}
    children: dict[int, set[int]] = {}
    for r in recs:
        prev: int | None = None
        for b in r.hash_ids:
            assert parent.setdefault(b, prev) == prev, "a block has one parent"
            if prev is not None:
                children.setdefault(prev, set()).add(b)
            prev = b
    seen: set[int] = set()
    reused = 0
    for r in recs:
        reused += sum(1 for b in r.hash_ids if b in seen)
        seen.update(r.hash_ids)
    assert reused > 0, "every shape shares prefixes"
    if shape in ("multi-turn-tail", "toolagent", "mixed"):  # partial tails: never reused
        tails = [r.hash_ids[-1] for r in recs]
        assert len(set(tails)) == len(tails) and not any(t in children for t in tails)
    if shape == "agent":  # forks: a context that several branches continue
        assert any(
            len(k) >= 2 for b, k in children.items() if b not in (r.hash_ids[0] for r in recs)
        )


def test_synthesize_rejects_unknown_shapes_and_bad_scales() -> None:
    with pytest.raises(ValueError, match="unknown synthetic shape"):
        synthesize("nope")
    with pytest.raises(ValueError, match="scale"):
        synthesize("agent", scale=0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mooncake-redis")
    add_replay_parser(p.add_subparsers(dest="cmd", required=True))
    return p


def test_cli_compare_prints_one_row_per_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    dump_trace(_records(), trace)
    args = _parser().parse_args(
        ["replay", "--trace", str(trace), "--target", "model", "--capacity-blocks", "150",
         "--lease-ttl-ms", "0", "--compare", "lru,tiered,arc", "--no-progress"]
    )  # fmt: skip
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "model " in line]
    assert [r.split("│")[1].strip() for r in rows] == ["model lru", "model tiered", "model arc"]
    assert all("0.0 / 0" in r for r in rows)  # orphans and incomplete blocks: none, ever
    args = _parser().parse_args(
        ["replay", "--trace", str(trace), "--target", "model", "--compare", "lru,tiered",
         "--json"]
    )  # fmt: skip
    assert args.func(args) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["params"]["scoring"] for r in res] == ["lru", "tiered"]
    assert res[1]["hits"] >= res[0]["hits"]


def test_cli_unknown_scoring_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    dump_trace(_records()[:5], trace)
    argv = ["replay", "--trace", str(trace), "--target", "model"]
    with pytest.raises(SystemExit) as refused:  # the parser itself refuses an unknown name
        _parser().parse_args([*argv, "--scoring", "bogus"])
    assert refused.value.code == 2 and "bogus" in capsys.readouterr().err
    for extra in (["--compare", "lru,bogus"], ["--compare", " , "]):
        args = _parser().parse_args([*argv, *extra])
        assert args.func(args) == 2
        err = capsys.readouterr().err
        assert "bogus" in err or "--compare" in err


def test_cli_store_refuses_a_model_only_policy_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    dump_trace(_records()[:5], trace)
    args = _parser().parse_args(
        ["replay", "--trace", str(trace), "--target", "redis", "--scoring", "arc"]
    )
    assert args.func(args) == 2
    assert "--target model" in capsys.readouterr().err
