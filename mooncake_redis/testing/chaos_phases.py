"""The chaos run's Redis phases: outages and out-of-memory spells longer than the client ttl.

Both need a Redis of the run's own (never the shared one): a throwaway redis-server on a free
loopback port with ``appendonly yes, appendfsync always``. An outage SIGKILLs it, waits, and
restarts it on the same port and directory (it comes back from its AOF); an OOM phase sets
``maxmemory`` just under what Redis holds at that moment and keeps it there (the evictor,
counting Redis memory, frees room while puts are refused with NO_AVAILABLE_HANDLE), then
lifts it. The lanes count what a phase refuses (RPC_FAIL during an outage,
NO_AVAILABLE_HANDLE during OOM) as phase refusals, not errors; kills wait while a phase runs.
The client ttl of the run is shorter than every phase, so that a client expired for the
store's own trouble loses its objects, and the run counts them as lost.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from .redis_servers import RedisProcess, free_port, oom_limit

GRACE_S = 1.5  # calls that started in a phase may fail a little after it ends


@dataclass
class PhaseState:
    kind: str = ""  # "" | "outage" | "oom"
    until: float = 0.0  # the phase (and its grace) ends at this monotonic time
    log: list[dict[str, Any]] = field(default_factory=list)

    def active(self) -> str:
        return self.kind if self.kind and time.monotonic() < self.until else ""

    def expected(self, code: int) -> bool:
        """Whether a refusal with this Mooncake code is what the current phase does."""
        kind = self.active()
        return (kind == "outage" and code == -900) or (kind == "oom" and code == -200)


def private_redis() -> RedisProcess:
    server = RedisProcess(
        free_port(),
        Path(tempfile.mkdtemp(prefix="mcr-chaos-")),
        ["--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"],
    )
    server.start()
    return server


def schedule(outages: int, ooms: int) -> list[str]:
    """Outage and OOM phases interleaved."""
    kinds: list[str] = []
    for i in range(max(outages, ooms)):
        if i < outages:
            kinds.append("outage")
        if i < ooms:
            kinds.append("oom")
    return kinds


async def run_phases(
    server: RedisProcess,
    state: PhaseState,
    kinds: list[str],
    t0: float,
    duration_s: float,
    t_start: float,
    outage_s: float,
    oom_s: float,
    say: Any,
    after: Any = None,
) -> None:
    """Runs the phases evenly spread over the load; awaits ``after()`` once each is over (the
    chaos run restarts a process that could not start while Redis was down)."""
    for i, kind in enumerate(kinds):
        length = outage_s if kind == "outage" else oom_s
        at = t0 + duration_s * (i + 1) / (len(kinds) + 1) - length / 2
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        start = time.monotonic()
        state.kind, state.until = kind, float("inf")
        entry: dict[str, Any] = {"kind": kind, "at_s": round(start - t_start, 1)}
        if kind == "outage":
            say(f"t={start - t_start:5.1f}s Redis down for {outage_s:.1f} s")
            server.stop(kill=True)
            await asyncio.sleep(outage_s)
            await asyncio.to_thread(server.start)
        else:
            admin = aioredis.Redis(port=server.port)
            try:
                used = int((await admin.info("memory"))["used_memory"])
                limit = oom_limit(used)
                say(f"t={start - t_start:5.1f}s Redis at maxmemory ({limit} B) for {oom_s:.1f} s")
                await admin.config_set("maxmemory", limit)
                entry["maxmemory"] = limit
                await asyncio.sleep(oom_s)
                await admin.config_set("maxmemory", 0)
            finally:
                await admin.aclose()
        entry["seconds"] = round(time.monotonic() - start, 1)
        state.log.append(entry)
        state.until = time.monotonic() + GRACE_S
        if after is not None:
            await after()
