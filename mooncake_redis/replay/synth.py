"""Seeded synthetic traces in the FAST'25 record shape, for the demo, the tests and the policy
study (``mooncake-redis replay --synth SHAPE``).

``generate(SynthConfig)`` is the multi-turn shape: a few hot system prompts shared by everyone,
conversations whose every turn extends their own previous chain (so chains get deep, over 100
blocks for the long ones), interleaved arrivals. The other shapes, and the table of all of them
by name (``synthesize``, ``shape_names``), live in ``synth_shapes``; every shape is a pure
function of its config and seed.

Partial tails: a FAST'25 trace names the last, partly filled 512-token block of a prompt too,
and the next turn cannot reuse it (it is a different block once filled). An engine that stores
only full pages (SGLang HiCache) never puts it. ``partial_tail=True`` adds one such block to
each request; the HiCache-style shapes leave it off by default.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mooncake_redis.replay.trace import TraceRecord


class Ids:
    """Fresh block ids, in order (ids are only names: sharing one means sharing a prefix)."""

    def __init__(self) -> None:
        self.next = 0

    def fresh(self, n: int) -> list[int]:
        ids = list(range(self.next, self.next + n))
        self.next += n
        return ids


class Timeline:
    """Collects requests out of order and returns them sorted by time (stable)."""

    def __init__(self, ids: Ids, partial_tail: bool) -> None:
        self.ids = ids
        self.partial_tail = partial_tail
        self._out: list[tuple[int, int, TraceRecord]] = []

    def add(self, t: float, context: list[int]) -> None:
        """A request at time t whose prompt is context (full blocks), plus its partial tail."""
        chain = context + self.ids.fresh(1) if self.partial_tail else context
        if chain:
            ts = max(0, int(t))
            self._out.append((ts, len(self._out), TraceRecord(ts, tuple(chain))))

    def records(self) -> list[TraceRecord]:
        self._out.sort(key=lambda x: (x[0], x[1]))
        return [r for _, _, r in self._out]


def zipf_weights(n: int, s: float = 1.0) -> list[float]:
    """Popularity of n items: a couple dominate, as a few apps dominate real traffic."""
    return [1.0 / (i + 1) ** s for i in range(n)]


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """Shape of the multi-turn workload; the defaults give ~1,000 requests."""

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
    partial_tail: bool = False


def generate(config: SynthConfig | None = None) -> list[TraceRecord]:
    """Requests sorted by timestamp; the same config always yields the same trace."""
    cfg = config or SynthConfig()
    rng = random.Random(cfg.seed)
    ids = Ids()
    out = Timeline(ids, cfg.partial_tail)
    prompts = [ids.fresh(rng.randint(*cfg.system_prompt_blocks)) for _ in range(cfg.system_prompts)]
    weights = zipf_weights(cfg.system_prompts)
    for _ in range(cfg.conversations):
        chain = list(rng.choices(prompts, weights)[0])
        if rng.random() < cfg.deep_share:
            turns = cfg.deep_turns
        else:
            turns = max(1, min(cfg.deep_turns - 1, round(rng.expovariate(1 / cfg.mean_turns))))
        t = rng.randrange(cfg.duration_ms)
        for _turn in range(turns):
            chain = chain + ids.fresh(rng.randint(*cfg.blocks_per_turn))
            out.add(t, chain)
            t += rng.randint(*cfg.think_time_ms)
    return out.records()
