"""The chaos run (:func:`run_chaos`; ``mooncake-redis chaos`` in :mod:`..cli.chaos`) runs worker
processes and the evictor against a real Redis or Redis Cluster, SIGKILLs one of them every few
seconds and restarts it, under mixed load with memory pressure, and ends with fsck and a count
of operations, kills, violations and losses. With ``outages`` / ``oom_phases`` it runs its own
redis-server and takes it down, or fills it to maxmemory, for longer than the client ttl
(chaos_phases.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..server.fleet import WorkerFleet
from .chaos_load import OBJ, Ledger, lane, pinger
from .chaos_phases import PhaseState, private_redis, run_phases, schedule
from .probes import complete_objects, namespace_keys

if TYPE_CHECKING:
    from ..service import MasterService


@dataclass
class ChaosOptions:
    redis_url: str = "redis://127.0.0.1:6379"
    namespace: str = ""
    duration_s: float = 30.0
    workers: int = 3
    lanes: int = 8
    kill_every_s: float = 3.0  # 0 = no kills (a plain load run)
    capacity_objects: int = 160  # both segments together: memory pressure for the evictor
    num_shards: int = 16
    seed: int = 0
    window_s: float = 5.0  # latency windows for the p99 drift
    outages: int = 0  # Redis outages (a private redis-server, killed and restarted from AOF)
    oom_phases: int = 0  # spells at maxmemory (a private redis-server)
    phase_s: float = 0.0  # length of each phase; 0: 2.5 client ttls
    client_live_ttl_ms: int = 0  # 0: 600 s, or 2 s when phases run (shorter than a phase)

    @property
    def private(self) -> bool:
        return self.outages > 0 or self.oom_phases > 0

    @property
    def client_ttl_ms(self) -> int:
        return self.client_live_ttl_ms or (2000 if self.private else 600_000)

    @property
    def phase_seconds(self) -> float:
        return self.phase_s or 2.5 * self.client_ttl_ms / 1000


@dataclass
class ChaosReport:
    options: dict[str, Any]
    ops: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    worker_tracebacks: list[str] = field(default_factory=list)  # what the processes logged
    interrupted_by_kills: int = 0  # in-flight calls a killed worker never answered
    phases: list[dict[str, Any]] = field(default_factory=list)  # Redis outages and OOM spells
    segments_mounted: int = 0  # at the end: 2 unless a client was expired
    refused_in_phases: int = 0  # calls a phase refused (RPC_FAIL in outages, -200 at OOM)
    kills: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    acked_complete: int = 0
    removed: int = 0
    removes_cut_by_kills: int = 0  # removes a killed worker applied without answering
    disappeared: int = 0
    evicted_total: int = 0
    lost_objects: int = 0
    violations_before_repair: list[str] = field(default_factory=list)
    allowed_before_repair: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    fsck_counts: dict[str, int] = field(default_factory=dict)
    p99_ms_by_window: list[float] = field(default_factory=list)
    redis_used_memory: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total_ops(self) -> int:
        return sum(self.ops.values())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["total_ops"] = self.total_ops
        d["total_kills"] = sum(self.kills.values())
        d["total_errors"] = sum(self.errors.values())
        d["violation_count"] = len(self.violations) + len(self.violations_before_repair)
        return d


class _Fleet(WorkerFleet):
    """Worker and evictor processes of one namespace, killed and restarted by the chaos loop."""

    def __init__(self, opts: ChaosOptions, log_dir: str) -> None:
        super().__init__(
            opts.redis_url,
            opts.namespace,
            opts.num_shards,
            opts.workers,
            env={
                "MOONCAKE_REDIS_EVICTION_HIGH_WATERMARK_RATIO": "0.8",
                "MOONCAKE_REDIS_EVICTION_RATIO": "0.2",
                "MOONCAKE_REDIS_CLIENT_LIVE_TTL_MS": str(opts.client_ttl_ms),
                "MOONCAKE_REDIS_EVICTOR_LEASE_TTL_MS": "1000",
                "MOONCAKE_REDIS_DEFAULT_KV_LEASE_TTL_MS": "200",
                "MOONCAKE_REDIS_ALLOC_COMMIT_DEADLINE_MS": "2000",
                "MOONCAKE_REDIS_ALLOC_RECLAIM_GRACE_MS": "4000",
            },
            worker_args=["--evictor", "off"],  # the separate evictor process holds the role
            log_dir=log_dir,
        )

    def tracebacks(self, limit: int = 5, size: int = 3000) -> list[str]:
        """The first tracebacks the processes logged, each up to its exception line and cut to
        its first frames and its end (the innermost frames and the exception, which a cut at
        the start used to drop)."""
        found = []
        for name, text in self.logs().items():
            for block in text.split("Traceback (most recent call last):")[1:]:
                lines = block.split("\n")
                # The frames are indented; the first line that is not is the exception.
                end = next((i for i, ln in enumerate(lines[1:], 1) if ln[:1] not in ("", " ")), -1)
                block = "\n".join(lines[: end + 1]) if end > 0 else block
                if len(block) > size:
                    block = f"{block[: size // 4]}\n  ...\n{block[-(size - size // 4) :]}"
                found.append(f"{name}: Traceback{block}")
        return found[:limit]


async def _redis_used_memory(service: MasterService) -> int:
    return await _used_memory(service.backend)


async def _used_memory(backend: Any) -> int:
    client = backend.client
    if backend.cluster:
        infos = await client.info("memory", target_nodes=client.get_primaries())
        return sum(int(v["used_memory"]) for v in infos.values())
    return int((await client.info("memory"))["used_memory"])


async def run_chaos(opts: ChaosOptions, progress: Any = None) -> ChaosReport:
    """Runs the fleet under load for ``duration_s``, killing a random process (SIGKILL) every
    ``kill_every_s`` and restarting it; then recovers (janitor, evictor journal, fsck repair)
    and counts. Returns the report; raises nothing for violations (the caller judges)."""
    from .. import Config, MasterService
    from ..client import AsyncMasterClient
    from ..fsck import ALLOWED_KINDS, fsck

    if not opts.namespace:
        opts.namespace = "chaos" + uuid.uuid4().hex[:8]
    say = progress or (lambda msg: None)
    rng = random.Random(opts.seed)
    server = None
    if opts.private:  # outages and OOM only ever on a Redis of the run's own
        server = await asyncio.to_thread(private_redis)
        opts.redis_url = server.url
    rep = ChaosReport(options=asdict(opts))
    t_start = time.monotonic()
    cfg = Config(namespace=opts.namespace, num_shards=opts.num_shards, enable_radix_tree=True)
    svc = await MasterService.from_url(opts.redis_url, cfg)
    log_dir = tempfile.mkdtemp(prefix="chaos-logs-")
    fleet = _Fleet(opts, log_dir)
    ping_stop = asyncio.Event()  # the clients ping until every process has exited
    pinging: asyncio.Task[None] | None = None
    try:
        mem0 = await _redis_used_memory(svc)
        fleet.start_evictor()
        for i in range(opts.workers):
            fleet.start_worker(i)
        await asyncio.gather(*(fleet.wait_ready(i) for i in range(opts.workers)))
        say(f"{opts.workers} workers and the evictor up on {opts.redis_url}")
        async with AsyncMasterClient(fleet.urls) as c:
            half = opts.capacity_objects * OBJ // 2
            for j in range(2):
                await c.mount_segment(
                    {"id": f"chaos-seg-{j}", "base": (j + 1) << 36, "size": half},
                    f"chaos-client-{j}",
                )
        ledger = Ledger()
        stop_at = time.monotonic() + opts.duration_s
        tasks = [
            asyncio.create_task(
                lane(i, fleet.urls, ledger, stop_at, opts.seed, opts.kill_every_s > 0)
            )
            for i in range(opts.lanes)
        ]
        pinging = asyncio.create_task(pinger(fleet.urls, ping_stop))
        if server is not None:
            kinds = schedule(opts.outages, opts.oom_phases)
            t0, length = time.monotonic(), opts.phase_seconds
            tasks.append(
                asyncio.create_task(
                    run_phases(
                        server,
                        ledger.phase,
                        kinds,
                        t0,
                        opts.duration_s,
                        t_start,
                        length,
                        length,
                        say,
                        lambda: _revive(fleet, ledger.phase),
                    )
                )
            )
        while opts.kill_every_s > 0 and time.monotonic() + opts.kill_every_s < stop_at:
            await asyncio.sleep(opts.kill_every_s * rng.uniform(0.5, 1.5))
            while ledger.phase.active():  # a restarted process needs Redis to start
                await asyncio.sleep(0.2)
            if time.monotonic() >= stop_at:
                break
            victim = rng.randrange(opts.workers + 1)
            if victim == opts.workers:
                assert fleet.evictor is not None
                fleet.evictor.kill()
                fleet.evictor.wait(10)
                fleet.start_evictor()
                rep.kills["evictor"] = rep.kills.get("evictor", 0) + 1
            else:
                proc = fleet.workers[victim]
                assert proc is not None
                proc.kill()
                proc.wait(10)
                fleet.start_worker(victim)
                rep.kills["worker"] = rep.kills.get("worker", 0) + 1
                await _until_ready(fleet, victim, ledger.phase)
            rep.restarts += 1
            say(f"t={time.monotonic() - t_start:5.1f}s kills={sum(rep.kills.values())} "
                f"ops={sum(ledger.ops.values())}")  # fmt: skip
        await asyncio.gather(*tasks)
        await _revive(fleet, ledger.phase)  # a process restarted just before a phase began
        await asyncio.to_thread(fleet.stop_all)  # the clients keep pinging meanwhile
        ping_stop.set()
        await pinging
        # Recovery, as the next janitor / evictor / operator would run it.
        report = await fsck(svc)
        unmounting = {s.id for s in await svc.segment_stats() if not s.mounted}
        for p in report.problems:
            if p.kind in ALLOWED_KINDS or (
                p.kind == "replica_unmounted" and p.detail.split()[3] in unmounting
            ):
                rep.allowed_before_repair[p.kind] = rep.allowed_before_repair.get(p.kind, 0) + 1
            else:
                rep.violations_before_repair.append(f"{p.kind}: {p.detail}")
        recover = Config(
            namespace=opts.namespace,
            num_shards=opts.num_shards,
            enable_radix_tree=True,
            alloc_commit_deadline_ms=2000,
            alloc_reclaim_grace_ms=4000,
        )
        svc2 = await MasterService.from_url(opts.redis_url, recover)
        try:
            if hasattr(svc2, "resume_unlinks"):
                await svc2.resume_unlinks()
            await asyncio.sleep(4.1)  # past the reclaim grace: reservations of killed workers
            await svc2.run_janitor_once(force=True)
            await fsck(svc2, repair=True, grace_ms=-1)  # every process is stopped: none fresh
            final = await fsck(svc2)
        finally:
            await svc2.aclose()
        rep.violations = [f"{p.kind}: {p.detail}" for p in final.problems if not p.repaired]
        rep.fsck_counts = dict(final.counts)
        present = await complete_objects(svc)
        gone = ledger.complete - present.keys()
        rep.acked_complete = len(ledger.complete)
        rep.removed = len(ledger.removed & gone)
        rep.removes_cut_by_kills = len(ledger.maybe_removed & gone)
        rep.disappeared = len(gone - ledger.removed - ledger.maybe_removed)
        rep.evicted_total = await _evicted_total(svc)
        rep.lost_objects = max(0, rep.disappeared - rep.evicted_total)
        rep.ops = dict(sorted(ledger.ops.items()))
        rep.errors = dict(sorted(ledger.errors.items()))
        rep.error_samples = list(ledger.error_samples)
        rep.phases = ledger.phase.log
        rep.refused_in_phases = ledger.refused_in_phases
        rep.segments_mounted = sum(1 for s in await svc.segment_stats() if s.mounted)
        rep.interrupted_by_kills = ledger.interrupted
        rep.p99_ms_by_window = _p99_windows(ledger.latencies, opts.window_s)
        rep.redis_used_memory = {"before": mem0, "after": await _redis_used_memory(svc)}
        return rep
    finally:
        ping_stop.set()
        if pinging is not None and not pinging.done():
            pinging.cancel()
            with contextlib.suppress(BaseException):
                await pinging
        fleet.stop_all()
        rep.worker_tracebacks = fleet.tracebacks()
        shutil.rmtree(log_dir, ignore_errors=True)
        rep.seconds = round(time.monotonic() - t_start, 1)
        await svc.aclose()
        if server is not None:
            server.stop(kill=True)
            shutil.rmtree(server.workdir, ignore_errors=True)  # its AOF: about 6 MB a run


async def _until_ready(fleet: _Fleet, i: int, phase: PhaseState) -> None:
    """A restarted worker cannot start while a Redis phase holds Redis down: start it again.
    One that is still starting when wait_ready gives up (a loaded host) is killed first: it
    was left running, outside the fleet (stop_all never stopped it), after the run ended."""
    for _ in range(10):
        try:
            await fleet.wait_ready(i)
            return
        except RuntimeError:
            while phase.active():
                await asyncio.sleep(0.2)
            proc = fleet.workers[i]
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
            fleet.start_worker(i)
    await fleet.wait_ready(i)


async def _revive(fleet: _Fleet, phase: PhaseState) -> None:
    """Restarts processes that exited (an evictor started just before an outage)."""
    while phase.active():
        await asyncio.sleep(0.2)
    if fleet.evictor is not None and fleet.evictor.poll() is not None:
        fleet.start_evictor()
    for i, proc in enumerate(fleet.workers):
        if proc is not None and proc.poll() is not None:
            fleet.start_worker(i)
            await _until_ready(fleet, i, phase)


async def _evicted_total(service: MasterService) -> int:
    return (await service.shard_totals("evicted_keys"))["evicted_keys"]


def _p99_windows(lat: list[tuple[float, float]], window: float) -> list[float]:
    if not lat:
        return []
    t0 = lat[0][0]
    buckets: dict[int, list[float]] = {}
    for t, d in lat:
        buckets.setdefault(int((t - t0) // window), []).append(d)
    out = []
    for b in sorted(buckets):
        xs = sorted(buckets[b])
        out.append(round(xs[min(len(xs) - 1, int(0.99 * len(xs)))] * 1000, 1))
    return out


async def _memory_of(url: str) -> int:
    from ..backend import Backend

    backend = Backend.from_url(url)
    try:
        await backend.connect()
        return await _used_memory(backend)
    finally:
        await backend.aclose()


async def _drop_namespace(url: str, namespace: str) -> None:
    from .. import Config, MasterService
    from ..errors import MooncakeError

    try:
        svc = await MasterService.from_url(url, Config(namespace=namespace), create=False)
    except MooncakeError:
        return  # never created (or already dropped)
    try:
        client = svc.backend.client
        for k in await namespace_keys(svc):
            await client.delete(k)
    finally:
        await svc.aclose()
