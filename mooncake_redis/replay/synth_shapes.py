"""Synthetic shapes beyond multi-turn chat, each seeded and documented, and the table of all the
named shapes (``synthesize(shape, seed, scale)``, ``shape_names()``):

- ``multi-turn``: :func:`.synth.generate` at the study size;
- ``agent``: agent sessions over a few long shared tool prompts; each step appends a tool call
  and its result and follows within seconds; some steps fork parallel branches (sub-agents,
  parallel tool calls) that run a few steps and end while the main line goes on from the fork;
  plus one-shot calls that share only the prompt. Full pages (HiCache style).
- ``toolagent``: a look-alike of the FAST'25 tool&agent trace's shape (its published
  description: long shared tool/agent prompts, short calls appended to them, high reuse): many
  short agent loops over a handful of long prompts, with partial tails. Parameters are ours,
  not fitted to the trace.
- ``mixed``: a look-alike of the FAST'25 synthetic trace's recipe (built from public data sets:
  ShareGPT-style chats, LooGLE-style long-document questions, ReAct-style agents), with partial
  tails: chats on short prompts, long documents each asked several questions over a while, and
  ReAct loops on a few-shot prompt.
- ``scan``: multi-turn chats on shared prompts, flooded by long one-off documents that are never
  asked again (the classic scan that LRU lets wash out the working set).
- ``multi-turn-tail``: the multi-turn shape with partial tails (as the FAST'25 conversation
  trace records them).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from mooncake_redis.replay.synth import Ids, SynthConfig, Timeline, generate, zipf_weights
from mooncake_redis.replay.trace import TraceRecord


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Agent sessions on shared tool prompts (the ``agent`` and ``toolagent`` shapes)."""

    seed: int = 0
    sessions: int = 500
    oneshots: int = 1_000
    prompts: int = 6
    prompt_blocks: tuple[int, int] = (16, 48)
    task_blocks: tuple[int, int] = (1, 6)
    mean_steps: float = 10.0
    max_steps: int = 60
    step_blocks: tuple[int, int] = (2, 12)
    step_gap_ms: tuple[int, int] = (2_000, 60_000)
    fork_share: float = 0.12
    """Chance that a step forks parallel branches (2-4 of them, 1-4 steps each)."""
    duration_ms: int = 3_600_000
    partial_tail: bool = False


def agent(cfg: AgentConfig) -> list[TraceRecord]:
    rng = random.Random(cfg.seed)
    ids = Ids()
    out = Timeline(ids, cfg.partial_tail)
    prompts = [ids.fresh(rng.randint(*cfg.prompt_blocks)) for _ in range(cfg.prompts)]
    weights = zipf_weights(cfg.prompts)
    for _ in range(cfg.oneshots):
        base = rng.choices(prompts, weights)[0]
        out.add(rng.randrange(cfg.duration_ms), base + ids.fresh(rng.randint(*cfg.task_blocks)))
    for _ in range(cfg.sessions):
        chain = rng.choices(prompts, weights)[0] + ids.fresh(rng.randint(*cfg.task_blocks))
        t = float(rng.randrange(cfg.duration_ms))
        steps = max(1, min(cfg.max_steps, round(rng.expovariate(1 / cfg.mean_steps))))
        for _step in range(steps):
            out.add(t, chain)
            if rng.random() < cfg.fork_share:
                for _b in range(rng.randint(2, 4)):
                    branch, tb = chain, t
                    for _s in range(rng.randint(1, 4)):
                        tb += rng.randint(*cfg.step_gap_ms)
                        branch = branch + ids.fresh(rng.randint(*cfg.step_blocks))
                        out.add(tb, branch)
            chain = chain + ids.fresh(rng.randint(*cfg.step_blocks))
            t += rng.randint(*cfg.step_gap_ms)
    return out.records()


@dataclass(frozen=True, slots=True)
class MixedConfig:
    """The ``mixed`` shape: chats, long-document questions and ReAct loops."""

    seed: int = 0
    chats: int = 1_500
    documents: int = 400
    questions: tuple[int, int] = (2, 12)
    document_blocks: tuple[int, int] = (30, 120)
    question_gap_ms: float = 90_000.0
    """Mean gap between two questions on one document (exponential)."""
    reacts: int = 800
    react_prompts: int = 2
    react_prompt_blocks: tuple[int, int] = (8, 20)
    duration_ms: int = 3_600_000
    partial_tail: bool = True


def mixed(cfg: MixedConfig) -> list[TraceRecord]:
    rng = random.Random(cfg.seed)
    ids = Ids()
    out = Timeline(ids, cfg.partial_tail)
    system = [ids.fresh(rng.randint(1, 4)) for _ in range(4)]
    for _ in range(cfg.chats):
        chain = list(rng.choices(system, zipf_weights(len(system)))[0])
        t = float(rng.randrange(cfg.duration_ms))
        for _turn in range(max(1, min(20, round(rng.expovariate(1 / 3.0))))):
            chain = chain + ids.fresh(rng.randint(1, 6))
            out.add(t, chain)
            t += rng.randint(10_000, 120_000)
    for _ in range(cfg.documents):
        doc = system[0] + ids.fresh(rng.randint(*cfg.document_blocks))
        t = float(rng.randrange(cfg.duration_ms))
        for _q in range(rng.randint(*cfg.questions)):
            out.add(t, doc + ids.fresh(rng.randint(0, 2)))
            t += rng.expovariate(1 / cfg.question_gap_ms)
    shots = [ids.fresh(rng.randint(*cfg.react_prompt_blocks)) for _ in range(cfg.react_prompts)]
    for _ in range(cfg.reacts):
        chain = rng.choice(shots) + ids.fresh(rng.randint(1, 3))
        t = float(rng.randrange(cfg.duration_ms))
        for _step in range(rng.randint(3, 10)):
            out.add(t, chain)
            chain = chain + ids.fresh(rng.randint(1, 3))
            t += rng.randint(2_000, 10_000)
    return out.records()


@dataclass(frozen=True, slots=True)
class ScanConfig:
    """The ``scan`` shape: the multi-turn chats plus one-off long documents."""

    seed: int = 0
    conversations: int = 2_000
    scans: int = 1_200
    scan_blocks: tuple[int, int] = (30, 150)
    duration_ms: int = 3_600_000
    partial_tail: bool = False


def scan(cfg: ScanConfig) -> list[TraceRecord]:
    chats = generate(
        SynthConfig(
            seed=cfg.seed,
            conversations=cfg.conversations,
            system_prompts=12,
            duration_ms=cfg.duration_ms,
            think_time_ms=(5_000, 300_000),
            partial_tail=cfg.partial_tail,
        )
    )
    rng = random.Random(cfg.seed + 1)
    ids = Ids()
    ids.next = 1 + max(b for r in chats for b in r.hash_ids)
    out = Timeline(ids, cfg.partial_tail)
    for r in chats:
        out.add(r.timestamp_ms, list(r.hash_ids[:-1] if cfg.partial_tail else r.hash_ids))
    for _ in range(cfg.scans):
        out.add(rng.randrange(cfg.duration_ms), ids.fresh(rng.randint(*cfg.scan_blocks)))
    return out.records()


def _n(x: int, scale: float) -> int:
    return max(1, round(x * scale))


def _multi_turn(seed: int, scale: float, partial_tail: bool) -> list[TraceRecord]:
    return generate(
        SynthConfig(
            seed=seed,
            conversations=_n(1_200, scale),
            system_prompts=12,
            duration_ms=_n(3_600_000, scale),
            think_time_ms=(5_000, 300_000),
            partial_tail=partial_tail,
        )
    )


Shape = Callable[[int, float], list[TraceRecord]]
"""(seed, scale) -> records; scale 1 is the study size (about 100k-300k block references)."""

SHAPES: dict[str, Shape] = {
    "multi-turn": lambda seed, scale: _multi_turn(seed, scale, partial_tail=False),
    "multi-turn-tail": lambda seed, scale: _multi_turn(seed, scale, partial_tail=True),
    "agent": lambda seed, scale: agent(
        AgentConfig(
            seed=seed,
            sessions=_n(500, scale),
            oneshots=_n(1_000, scale),
            duration_ms=_n(3_600_000, scale),
        )
    ),
    "toolagent": lambda seed, scale: agent(
        AgentConfig(
            seed=seed,
            sessions=_n(3_000, scale),
            oneshots=_n(4_000, scale),
            prompts=8,
            prompt_blocks=(8, 40),
            mean_steps=3.0,
            max_steps=20,
            step_blocks=(1, 3),
            step_gap_ms=(2_000, 30_000),
            fork_share=0.05,
            duration_ms=_n(3_600_000, scale),
            partial_tail=True,
        )
    ),
    "mixed": lambda seed, scale: mixed(
        MixedConfig(
            seed=seed,
            chats=_n(1_500, scale),
            documents=_n(400, scale),
            reacts=_n(800, scale),
            duration_ms=_n(3_600_000, scale),
        )
    ),
    "scan": lambda seed, scale: scan(
        ScanConfig(
            seed=seed,
            conversations=_n(2_000, scale),
            scans=_n(1_200, scale),
            duration_ms=_n(3_600_000, scale),
        )
    ),
}


def shape_names() -> list[str]:
    return list(SHAPES)


def synthesize(shape: str, seed: int = 0, scale: float = 1.0) -> list[TraceRecord]:
    """A named shape (``shape_names()``); ValueError for an unknown one."""
    make = SHAPES.get(shape)
    if make is None:
        raise ValueError(f"unknown synthetic shape {shape!r}; expected one of {shape_names()}")
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    return make(seed, scale)
