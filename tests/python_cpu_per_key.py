"""Python CPU per key of batch puts and batch exists, in process, on a throwaway redis-server.

``python3 tests/python_cpu_per_key.py <source tree>`` imports mooncake_redis from that tree (e.g.
``.``, or a checkout of an older commit), puts ``BATCHES`` batches of 128 keys (chains of 64
blocks, each key with its parent block, as the throughput bench: MLA, then MHA TP 4) with
batch_put_start + batch_put_end, then runs batch_exist_key over them (present keys, then absent
ones), and prints the microseconds of this process's CPU (``time.process_time``: user + sys of
the Python side, not Redis's, not the wall time) per key for each call. ``REDIS_CPU_PORT`` picks
the server's port (a shared machine's own range); otherwise a free one. ``PYCPU_SHARDS`` sets the
shard count (default 64, the count of the earlier figures; 0: the store's default, 1 on one
Redis). ``PYCPU_PROFILE=put``
(or ``exist``) prints a cProfile (CPU clock) of that part instead of the figures' last rounds.

``PYCPU_CALLGRIND=1`` runs this process under valgrind's callgrind instead (it re-executes
itself) and prints the instructions of the Python process per key for each call (instrumentation
on only around the measured calls, one dump each): a count that a loaded machine does not move,
unlike the CPU times (one round of ``PYCPU_BATCHES``, default 10 then; the warm-up round
uninstrumented). Redis runs natively either way.

Not a test: the measuring tool behind the Python figures of docs/benchmarks.md; run two trees in
turn, twice each, to compare them on the same machine state (the Python CPU of a process moves
less with load than wall time, but a shared machine's caches and frequency still move it).
"""

from __future__ import annotations

import asyncio
import cProfile
import glob
import os
import pstats
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from typing import Any

import redis

BATCH = int(os.environ.get("PYCPU_BATCH", "128"))
GRIND = bool(os.environ.get("PYCPU_CALLGRIND"))
BATCHES = int(os.environ.get("PYCPU_BATCHES", "10" if GRIND else "40"))
ROUNDS = 1 if GRIND else 3  # each part runs this often over fresh keys; the minimum is reported


def _port() -> int:
    if os.environ.get("REDIS_CPU_PORT"):
        return int(os.environ["REDIS_CPU_PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batches(fmt: str, salt: str) -> list[list[tuple[str, str]]]:
    from blake3 import blake3

    def blk(i: int) -> str:
        return blake3(f"{salt}{i}".encode()).hexdigest()

    out: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    i = 0
    while len(out) < BATCHES:
        b, parent = blk(i), (blk(i - 1) if i % 64 else "")
        ks = [b] if fmt == "mla" else [f"{b}_{t}_{kv}" for t in range(4) for kv in "kv"]
        for k in ks:
            cur.append((k, parent))
            if len(cur) == BATCH:
                out.append(cur)
                cur = []
        i += 1
    return out


class Meter:
    """CPU seconds (process_time) or, under callgrind, instructions of each measured call."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.dumped: list[str] = []

    def _ctl(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    async def __call__(self, name: str, aw: Awaitable[Any], counted: bool) -> tuple[Any, float]:
        if GRIND and counted:
            # Instrumentation stays on for the round (toggling it around each call corrupts
            # the counts of the frames alive across the toggle): a dump before the call takes
            # what ran since the last one, a dump after it the call itself.
            if not self.dumped:
                self._ctl("-i", "on")
            self._ctl("-d", "between")
            res = await aw
            self._ctl("-d", name)
            self.dumped += ["between", name]
            return res, 0.0
        t0 = time.process_time()
        res = await aw
        return res, time.process_time() - t0

    def instructions(self) -> dict[str, int]:
        """Instructions per dumped name (the dumps of this process, in order)."""
        files = sorted(
            glob.glob(f"{self.workdir}/cg.{os.getpid()}.*"), key=lambda f: int(f.split(".")[-1])
        )
        files = [f for f in files if not f.endswith(".0")][-len(self.dumped) :]
        out: dict[str, int] = {}
        for f, name in zip(files, self.dumped):
            with open(f) as fh:
                m = re.search(r"^summary: (\d+)", fh.read(), re.M)
            out[name] = out.get(name, 0) + (int(m[1]) if m else 0)
        return out


async def main(tree: str) -> None:
    sys.path.insert(0, tree)
    from mooncake_redis import Config, MasterService
    from mooncake_redis.models import ReplicateConfig, Segment

    port = _port()
    workdir = tempfile.mkdtemp()
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    profile = os.environ.get("PYCPU_PROFILE", "")
    meter = Meter(os.environ.get("PYCPU_GRIND_DIR", workdir))
    try:
        r = redis.Redis(port=port)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        if proc.poll() is not None:  # another server holds the port: not a fresh store
            raise SystemExit(f"redis-server could not start on port {port}")
        url = f"redis://127.0.0.1:{port}"
        cfg = Config(
            namespace="py" + uuid.uuid4().hex[:8],
            num_shards=int(os.environ.get("PYCPU_SHARDS", "64")),
            enable_radix_tree=True,
            redis_url=url,
        )
        svc = await MasterService.from_url(url, cfg)
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 36), "c")
        rows: dict[str, float] = {}
        for fmt in ("mla", "mha"):
            best: dict[str, float] = {}
            for rnd in range(ROUNDS + 1):  # round 0 warms up (scripts loaded, caches filled)
                batches = _batches(fmt, f"{fmt}{rnd}")
                plan = [
                    ([k for k, _ in b], [ReplicateConfig(parent_block_hash=p) for _, p in b])
                    for b in batches
                ]
                prof = cProfile.Profile(time.process_time) if profile and rnd == ROUNDS else None
                put_s = end_s = 0.0
                if prof and profile == "put":
                    prof.enable()
                for keys, cfgs in plan:
                    counted = rnd > 0
                    res, dt = await meter(
                        "put_start",
                        svc.batch_put_start("c", keys, [[4096]] * len(keys), cfgs),
                        counted,
                    )
                    put_s += dt
                    ended, dt = await meter("put_end", svc.batch_put_end("c", keys), counted)
                    end_s += dt
                    assert all(isinstance(x, list) and x for x in res), res[:3]
                    assert ended == [None] * len(keys), ended[:3]
                if prof and profile == "put":
                    prof.disable()
                exist_s = absent_s = 0.0
                if prof and profile == "exist":
                    prof.enable()
                for keys, _ in plan:
                    absent = [k + "-absent" for k in keys]
                    found, dt = await meter("exist", svc.batch_exist_key(keys), rnd > 0)
                    exist_s += dt
                    missing, dt = await meter("exist_absent", svc.batch_exist_key(absent), rnd > 0)
                    absent_s += dt
                    assert found == [True] * len(keys), found[:3]
                    assert missing == [False] * len(keys), missing[:3]
                if prof and profile == "exist":
                    prof.disable()
                if prof:
                    top = int(os.environ.get("PYCPU_TOP", "35"))
                    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)
                if rnd == 0:
                    continue
                n = BATCHES * BATCH / 1e6
                for name, s in (("put_start", put_s), ("put_end", end_s), ("exist", exist_s),
                                ("exist_absent", absent_s)):  # fmt: skip
                    best[name] = min(best.get(name, float("inf")), s / n)
            if GRIND:
                meter._ctl("-i", "off")
                n = BATCHES * BATCH * 1000
                counts = meter.instructions()
                best = {k: v / n for k, v in counts.items() if k != "between"}
                meter.dumped.clear()
            best["put"] = best["put_start"] + best["put_end"]
            rows.update({f"{fmt} {k}": round(v, 1) for k, v in best.items()})
        what = "thousand instructions" if GRIND else f"CPU us (min of {ROUNDS} rounds)"
        print(tree, f"Python {what} per key:", rows)
        await svc.aclose()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if GRIND and not os.environ.get("PYCPU_GRIND_DIR"):  # re-run under callgrind
        out = tempfile.mkdtemp()
        os.environ["PYCPU_GRIND_DIR"] = out
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--log-file={out}/vg.log",
               f"--callgrind-out-file={out}/cg.%p", sys.executable, *sys.argv]  # fmt: skip
        code = subprocess.run(cmd).returncode
        shutil.rmtree(out, ignore_errors=True)
        sys.exit(code)
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
