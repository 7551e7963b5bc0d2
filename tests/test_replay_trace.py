"""Trace parsing, key formats and the synthetic generator."""

from __future__ import annotations

from pathlib import Path

import pytest

from mooncake_redis.replay.synth import SynthConfig, generate
from mooncake_redis.replay.trace import (
    TraceError,
    block_hash,
    blocks_for,
    dump_trace,
    keys_for,
    load_trace,
    objects_per_block,
)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"hash_ids": [1]}', "'timestamp'"),
        ('{"timestamp": -1, "hash_ids": [1]}', "'timestamp'"),
        ('{"timestamp": 1, "hash_ids": []}', "'hash_ids'"),
        ('{"timestamp": 1, "hash_ids": "1,2"}', "'hash_ids'"),
        ('{"timestamp": 1, "hash_ids": [1, "x"]}', "hash_ids[1]"),
        ('{"timestamp": 1, "hash_ids": [1, -2]}', "hash_ids[1]"),
        ('{"timestamp": 1, "hash_ids": [true]}', "hash_ids[0]"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad: str, needle: str) -> None:
    good = '{"timestamp": 0, "hash_ids": [0, 1]}'
    p = _write(tmp_path, f"{good}\n\n{good}\n{bad}\n{good}\n")
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    msg = str(exc.value)
    assert f"{p}:4:" in msg  # the blank line still counts
    assert needle in msg


def test_limit_stops_before_a_later_bad_line(tmp_path: Path) -> None:
    p = _write(tmp_path, '{"timestamp": 0, "hash_ids": [0]}\nbroken\n')
    assert len(load_trace(p, limit=1)) == 1


def test_real_trace_head_parses() -> None:
    recs = load_trace("/work/shared/traces/conversation_trace.jsonl", limit=50)
    assert len(recs) == 50
    assert recs[0].hash_ids[0] == 0


def test_block_hash_is_blake3_of_decimal_id() -> None:
    from blake3 import blake3

    h = block_hash(46)
    assert h == blake3(b"46").hexdigest()
    assert len(h) == 64
    assert int(h, 16) >= 0


def test_key_formats() -> None:
    h = block_hash(7)
    assert keys_for(h, "mla") == (h,)
    mha = keys_for(h, "mha", tp=2)
    assert mha == (f"{h}_0_k", f"{h}_0_v", f"{h}_1_k", f"{h}_1_v")
    assert objects_per_block("mha", 4) == 8
    assert objects_per_block("mla", 4) == 1
    with pytest.raises(ValueError):
        keys_for(h, "gqa")


def test_blocks_chain_parents(tmp_path: Path) -> None:
    p = _write(tmp_path, '{"timestamp": 5, "hash_ids": [3, 9, 4]}\n')
    (rec,) = load_trace(p)
    blocks = blocks_for(rec, "mha", tp=1)
    assert [b.parent_hash for b in blocks] == ["", block_hash(3), block_hash(9)]
    assert blocks[1].keys == (f"{block_hash(9)}_0_k", f"{block_hash(9)}_0_v")


def test_synthetic_shape() -> None:
    cfg = SynthConfig(seed=3)
    recs = generate(cfg)
    assert len(recs) > cfg.conversations  # multi-turn
    ts = [r.timestamp_ms for r in recs]
    assert ts == sorted(ts)
    assert max(len(r.hash_ids) for r in recs) > 100  # deep chains exist
    # Every request starts with one of the few shared system prompts.
    firsts = {r.hash_ids[0] for r in recs}
    assert len(firsts) <= cfg.system_prompts
    # Block ids are consistent: one parent per block, as in the real trace.
    parent: dict[int, int | None] = {}
    for r in recs:
        prev: int | None = None
        for b in r.hash_ids:
            assert parent.setdefault(b, prev) == prev
            prev = b
    # Later turns extend an earlier request's chain (conversations build on themselves).
    chains = {r.hash_ids for r in recs}
    extended = sum(
        1 for r in recs if any(r.hash_ids[:k] in chains for k in range(len(r.hash_ids) - 1, 0, -1))
    )
    assert extended > len(recs) // 2


def test_synthetic_deterministic(tmp_path: Path) -> None:
    a = generate(SynthConfig(seed=11, conversations=30))
    assert a == generate(SynthConfig(seed=11, conversations=30))
    assert a != generate(SynthConfig(seed=12, conversations=30))
    p = tmp_path / "s.jsonl"
    dump_trace(a, p)
    assert load_trace(p) == a
