"""A seeded synthetic trace in the FAST'25 record shape, for the demo and for tests.

It reproduces what makes prefix eviction hard on the real trace: a few hot system prompts shared
by everyone, multi-turn conversations whose every turn extends their own previous chain (so
chains get deep, over 100 blocks for the long ones), and interleaved arrivals.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mooncake_redis.replay.trace import TraceRecord


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """Shape of the synthetic workload; the defaults give ~1,000 requests."""

    seed: int = 0
    conversations: int = 200
    system_prompts: int = 6
    system_prompt_blocks: tuple[int, int] = (4, 24)
    mean_turns: float = 4.0
    deep_share: float = 0.08
    """Share of conversations that go on for deep_turns turns (the >100-block chains)."""
    deep_turns: int = 30
    blocks_per_turn: tuple[int, int] = (2, 8)
    duration_ms: int = 600_000
    think_time_ms: tuple[int, int] = (5_000, 60_000)


def generate(config: SynthConfig | None = None) -> list[TraceRecord]:
    """Requests sorted by timestamp; the same config always yields the same trace."""
    cfg = config or SynthConfig()
    rng = random.Random(cfg.seed)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    prompts = [fresh(rng.randint(*cfg.system_prompt_blocks)) for _ in range(cfg.system_prompts)]
    # Zipf-like popularity: a couple of prompts dominate, as a few apps dominate real traffic.
    weights = [1.0 / (i + 1) for i in range(cfg.system_prompts)]
    out: list[tuple[int, int, TraceRecord]] = []
    seq = 0
    for _ in range(cfg.conversations):
        chain = list(rng.choices(prompts, weights)[0])
        if rng.random() < cfg.deep_share:
            turns = cfg.deep_turns
        else:
            turns = max(1, min(cfg.deep_turns - 1, round(rng.expovariate(1 / cfg.mean_turns))))
        t = rng.randrange(cfg.duration_ms)
        for _turn in range(turns):
            chain = chain + fresh(rng.randint(*cfg.blocks_per_turn))
            out.append((t, seq, TraceRecord(t, tuple(chain))))
            seq += 1
            t += rng.randint(*cfg.think_time_ms)
    out.sort(key=lambda x: (x[0], x[1]))
    return [r for _, _, r in out]
