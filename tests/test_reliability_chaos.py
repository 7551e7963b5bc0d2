"""Chaos, short variant (CI): three worker processes and the evictor on the real Redis and on
the Redis Cluster, mixed load with memory pressure, a random process SIGKILLed and restarted
every ~2 s. Ends with recovery (janitor, evictor journal, fsck --repair) and the counts: no
invariant violation, no lost object, no unexpected error. The long variant is the
``mooncake-redis chaos`` command (docs/reliability.md)."""

from __future__ import annotations

import json
import os

from mooncake_redis.chaos import ChaosOptions, _drop_namespace, run_chaos

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
    assert d["total_errors"] == 0, d
