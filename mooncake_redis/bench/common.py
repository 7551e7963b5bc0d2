"""Shared pieces of the benchmarks: timing, a command counter, and a tree populator."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from blake3 import blake3

from ..config import Config
from ..models import ReplicateConfig, Segment
from ..service import MasterService


class BenchFailure(RuntimeError):
    """A measured call failed or did not find what was stored: no figure is reported."""


def check_answers(
    what: str, answers: Sequence[Any], expected: int, ok: Callable[[Any], bool]
) -> None:
    """Raises unless a batch call gave ``expected`` answers and every one passes ``ok``."""
    bad = [r for r in answers if not ok(r)]
    if len(answers) != expected or bad:
        raise BenchFailure(
            f"{what}: {len(answers)} answers for {expected} keys, {len(bad)} wrong {bad[:1]!r}"
        )


def stored(r: Any) -> bool:
    """A put_start answer that got replicas."""
    return isinstance(r, list) and bool(r)


CLIENT = "bench-client"


def block_hash(i: int, salt: str = "") -> str:
    return blake3(f"{salt}{i}".encode()).hexdigest()


def keys_of(block: str, key_format: str, tp: int) -> list[str]:
    if key_format == "mla":
        return [block]
    return [f"{block}_{r}_{kv}" for r in range(tp) for kv in ("k", "v")]


def pct(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": pct(samples, 0.50) * 1000,
        "p99_ms": pct(samples, 0.99) * 1000,
        "mean_ms": statistics.fmean(samples) * 1000 if samples else float("nan"),
    }


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


class CommandCounter:
    """Counts commands sent and sequential waves (what a caller waits for) on one service: the
    client's commands and, on a single Redis over TCP, the scripts' channel's."""

    def __init__(self, svc: MasterService) -> None:
        self.commands = 0
        self.waves = 0
        self._in_flight = 0
        client = svc.backend.client
        client.execute_command = self._counted(client.execute_command)
        channel = svc.backend.channel
        if channel is not None:
            channel.execute = self._counted(channel.execute)  # type: ignore[method-assign,assignment]

    def _counted(self, original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if self._in_flight == 0:
                self.waves += 1
            self._in_flight += 1
            self.commands += 1
            try:
                return await original(*args, **kwargs)
            finally:
                self._in_flight -= 1

        return counted

    async def measure(self, fn: Callable[[], Awaitable[Any]]) -> tuple[int, int]:
        self.commands = self.waves = 0
        await fn()
        return self.commands, self.waves


async def fresh_service(url: str, **config: Any) -> MasterService:
    ns = "bench" + uuid.uuid4().hex[:8]
    cfg = Config(namespace=ns, redis_url=url, **config)
    return await MasterService.from_url(url, cfg)


async def mount(svc: MasterService, total_bytes: int, segments: int = 1) -> None:
    per = max(1, total_bytes // segments)
    for i in range(segments):
        seg = Segment(f"bench-seg-{i}", f"bench-seg-{i}", (i + 1) << 44, per)
        await svc.mount_segment(seg, CLIENT)


async def populate(
    svc: MasterService,
    blocks: int,
    *,
    key_format: str = "mla",
    tp: int = 1,
    chain: int = 64,
    value_size: int = 4096,
    batch: int = 128,
    salt: str = "",
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Stores ``blocks`` blocks as chains of ``chain`` blocks (each with its parent), in
    batch-128 put_start/put_end calls. Returns the block hashes."""
    hashes = [block_hash(i, salt) for i in range(blocks)]
    pending_keys: list[str] = []
    pending_cfg: list[ReplicateConfig] = []

    async def flush() -> None:
        if not pending_keys:
            return
        res = await svc.batch_put_start(
            CLIENT, list(pending_keys), [[value_size]] * len(pending_keys), list(pending_cfg)
        )
        check_answers("batch_put_start", res, len(pending_keys), stored)
        ended = await svc.batch_put_end(CLIENT, list(pending_keys))
        check_answers("batch_put_end", ended, len(pending_keys), lambda r: r is None)
        if progress:
            progress(len(pending_keys))
        pending_keys.clear()
        pending_cfg.clear()

    for i, blk in enumerate(hashes):
        parent = hashes[i - 1] if i % chain else ""
        for key in keys_of(blk, key_format, tp):
            pending_keys.append(key)
            pending_cfg.append(ReplicateConfig(parent_block_hash=parent))
            if len(pending_keys) >= batch:
                await flush()
    await flush()
    return hashes


async def scan_namespace(svc: MasterService, pattern: str, count: int = 2000) -> list[Any]:
    """Every key matching ``pattern`` on every primary (one SCAN walk per node)."""
    client = svc.backend.client
    if not svc.backend.cluster:
        return [k async for k in client.scan_iter(match=pattern, count=count)]
    found: list[Any] = []
    for node in client.get_primaries():
        cursor: Any = 0
        while True:
            reply = await client.execute_command(
                "SCAN", cursor, "MATCH", pattern, "COUNT", count, target_nodes=node
            )
            cursor, keys = reply
            if isinstance(cursor, dict):  # redis-py's cluster SCAN: ({node name: cursor}, keys)
                cursor = next(iter(cursor.values()))
            found.extend(keys)
            if int(cursor) == 0:
                break
    return found


async def drop_namespace(svc: MasterService) -> None:
    """Deletes every key of the service's namespace (benchmarks clean up after themselves)."""
    keys = await scan_namespace(svc, "{" + svc.config.namespace + ":*")
    for start in range(0, len(keys), 1000):
        await svc.backend.client.unlink(*keys[start : start + 1000])
