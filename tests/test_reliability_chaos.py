"""Chaos, short variant (CI): three worker processes and the evictor on the real Redis and on
the Redis Cluster, mixed load with memory pressure, a random process SIGKILLed and restarted
every ~2 s. Ends with recovery (janitor, evictor journal, fsck --repair) and the counts: no
invariant violation, no lost object, no unexpected error. The long variant is the
``mooncake-redis chaos`` command (docs/reliability.md)."""

from __future__ import annotations

import json
import os

from mooncake_redis.testing.chaos import ChaosOptions, _drop_namespace, run_chaos

FIGURES = os.environ.get("MCR_RELIABILITY_FIGURES")


async def test_chaos_short(real_backend_url: str) -> None:
    opts = ChaosOptions(redis_url=real_backend_url, duration_s=7, kill_every_s=1.5, lanes=6)
    try:
        rep = await run_chaos(opts)
    finally:
        await _drop_namespace(real_backend_url, opts.namespace)
    d = rep.to_dict()
    if FIGURES:
        with open(FIGURES, "a") as f:
            f.write(json.dumps({"test": "chaos_short", **d}) + "\n")
    assert sum(rep.kills.values()) >= 2, d
    assert d["total_ops"] > 200, d
    assert rep.violations_before_repair == [] and rep.violations == [], d
    assert rep.lost_objects == 0, d
    assert d["total_errors"] == 0, (rep.error_samples, rep.worker_tracebacks, d)


async def test_chaos_redis_outage_and_oom_lose_nothing() -> None:
    """Issue 14 items 2 and 3 under load: the run's own redis-server goes down for 2.5 client
    ttls (SIGKILL, restart from AOF) and later sits at maxmemory for as long (kills, when the
    random schedule puts one between the phases, wait for them to end). No client is expired
    (both segments stay mounted), no acknowledged object is lost, nothing but the phases'
    refusals fails."""
    opts = ChaosOptions(duration_s=16, kill_every_s=2.5, lanes=6, outages=1, oom_phases=1)
    rep = await run_chaos(opts)
    d = rep.to_dict()
    if FIGURES:
        with open(FIGURES, "a") as f:
            f.write(json.dumps({"test": "chaos_outage_oom", **d}) + "\n")
    assert [p["kind"] for p in rep.phases] == ["outage", "oom"], d
    assert all(p["seconds"] * 1000 > opts.client_ttl_ms for p in rep.phases), d
    assert rep.refused_in_phases > 0, d
    assert rep.segments_mounted == 2, d
    assert rep.violations_before_repair == [] and rep.violations == [], d
    assert rep.lost_objects == 0 and rep.acked_complete > 100, d
    assert d["total_errors"] == 0, (rep.error_samples, rep.worker_tracebacks, d)
