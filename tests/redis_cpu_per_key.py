"""Redis CPU per key of batch puts, by script, from INFO commandstats on a throwaway redis-server.

``python3 tests/redis_cpu_per_key.py <source tree>`` imports mooncake_redis from that tree (e.g.
``.``, or a checkout of an older commit), puts 19 batches of 128 keys (chains of 256 blocks, one
parent per key, put_start + put_end) and prints the microseconds of Redis CPU per key for each
script. Then ``reads`` does the same for batch_exist_key and batch_get_replica_list (MLA and
MHA keys; docs/benchmarks.md "The read path"). ``REDIS_CPU_SHARDS`` sets the shard count
(default: the store's default, 1 on one Redis; 64 before that default). ``REDIS_CPU_PORT``
picks the server's port (a shared machine's own range); otherwise a free one. Not a test: the
measuring tool behind the figures in docs/store.md and docs/benchmarks.md; run two trees back
to back to compare them on the same machine state.

``REDIS_CPU_CALLGRIND=1`` runs the server under valgrind's callgrind instead and prints the
instructions the server executed per put key, by script (each call dumped apart with
callgrind_control): a count that a loaded machine does not move, unlike the CPU times; then the
reads' instructions per key (each read batch called once, not three times: valgrind slows the
server about 50 times). ``REDIS_CPU_ONLY=reads`` skips the measured puts (reads only, both
modes).
"""

from __future__ import annotations

import asyncio
import collections
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import redis


def _port() -> int:
    if os.environ.get("REDIS_CPU_PORT"):  # a port of one's own range on a shared machine
        return int(os.environ["REDIS_CPU_PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(tree: str) -> None:
    sys.path.insert(0, tree)
    from mooncake_redis import Config, MasterService
    from mooncake_redis.models import ReplicateConfig, Segment

    port = _port()
    binary = shutil.which("redis-server") or "redis-server"
    workdir = tempfile.mkdtemp()
    grind = bool(os.environ.get("REDIS_CPU_CALLGRIND"))
    prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
              f"--callgrind-out-file={workdir}/cg.%p"] if grind else []  # fmt: skip
    proc = subprocess.Popen(
        [*prefix, binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir",
         workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def grind_ctl(*args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    dumped: list[str] = []  # script name of each callgrind dump, in order
    try:
        r = redis.Redis(port=port)
        for _ in range(1200 if grind else 100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        url = f"redis://127.0.0.1:{port}"
        # REDIS_CPU_SHARDS: the shard count (default 0, the store's own: 1 on this one Redis;
        # 64 gives the figures of the sessions before the default changed).
        shards = int(os.environ.get("REDIS_CPU_SHARDS", "0"))
        cfg = Config(namespace="p", num_shards=shards, enable_radix_tree=True, redis_url=url)
        svc = await MasterService.from_url(url, cfg)
        print(tree, "shards:", svc.config.num_shards)
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 34), "c")
        per: collections.Counter[str] = collections.Counter()
        orig = svc.backend.call

        cpu_per: collections.Counter[str] = collections.Counter()

        def usec() -> int:
            stats = r.info("commandstats")
            return sum(int(v["usec"]) for k, v in stats.items() if k.startswith("cmdstat_eval"))

        def cpu() -> float:
            c = r.info("cpu")
            return float(c["used_cpu_user"]) + float(c["used_cpu_sys"])

        # One script call at a time: the put runs alloc_reserve and radix_link concurrently,
        # and overlapping calls would each count the other's time.
        one_at_a_time = asyncio.Lock()

        async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
            async with one_at_a_time:
                if grind:
                    res = await orig(name, keys, args, node)
                    if measuring:
                        grind_ctl("-d", name)
                        dumped.append(name)
                    return res
                before, c0 = usec(), cpu()
                res = await orig(name, keys, args, node)
                per[name] += usec() - before
                cpu_per[name] += cpu() - c0
            return res

        measuring = False
        svc.backend.call = call  # type: ignore[method-assign]
        keys = [uuid.uuid4().hex * 2 for _ in range(128 * 20)]
        await svc.batch_put_start("c", keys[:128], [[64]] * 128)
        await svc.batch_put_end("c", keys[:128])
        per.clear()
        cpu_per.clear()
        r.config_resetstat()
        cpu0 = r.info("cpu")
        only_reads = os.environ.get("REDIS_CPU_ONLY") == "reads"
        if grind:
            grind_ctl("-i", "on")
            grind_ctl("-z")
            measuring = not only_reads
        for i in range(1, 1 if only_reads else 20):
            b = keys[i * 128 : (i + 1) * 128]
            parents = [keys[i * 128 - 1] if i % 2 else "", *b[:-1]]
            cfgs = [ReplicateConfig(parent_block_hash=p) for p in parents]
            res = await svc.batch_put_start("c", b, [[64]] * 128, cfgs)
            assert all(isinstance(x, list) for x in res), res[:3]
            assert await svc.batch_put_end("c", b) == [None] * 128
        n = 19 * 128

        def grind_counts() -> collections.Counter[str]:
            """Instructions per label of the dumps so far (dumped[i] labels dump i + 1)."""
            files = sorted(
                glob.glob(f"{workdir}/cg.{proc.pid}.*"), key=lambda f: int(f.split(".")[-1])
            )
            assert len(files) == len(dumped), (len(files), len(dumped))
            ir: collections.Counter[str] = collections.Counter()
            for f, name in zip(files, dumped):
                with open(f) as fh:
                    m = re.search(r"^summary: (\d+)", fh.read(), re.M)
                ir[name] += int(m[1]) if m else 0
            return ir

        def keep_dumps(keep: str | None) -> None:
            """With ``GRIND_KEEP=<dir>``: the dumps so far, copied there as ``<n>.<label>`` (for
            ``callgrind_annotate``)."""
            if not keep:
                return
            os.makedirs(keep, exist_ok=True)
            files = sorted(
                glob.glob(f"{workdir}/cg.{proc.pid}.*"), key=lambda f: int(f.split(".")[-1])
            )
            for k, (f, name) in enumerate(zip(files, dumped)):
                shutil.copy(f, os.path.join(keep, f"{k:04d}.{name}"))

        def grind_dump(label: str) -> None:
            grind_ctl("-d", label)
            dumped.append(label)

        if grind:
            measuring = False
            if not only_reads:
                ir = grind_counts()
                rows_ir = {k: round(v / n / 1000, 1) for k, v in sorted(ir.items())}
                print(tree, "Redis thousand instructions per put key (callgrind):", rows_ir,
                      "total", round(sum(ir.values()) / n / 1000, 1))  # fmt: skip
                keep_dumps(os.environ.get("GRIND_KEEP"))
            r.config_resetstat()
            done = len(dumped)
            counted = await reads(svc, r, tree, (lambda: grind_ctl("-z"), grind_dump))
            ir = grind_counts()
            for name in dumped[:done]:
                ir.pop(name, None)
            rows_ir = {k: round(v / counted[k] / 1000, 2) for k, v in sorted(ir.items())}
            print(tree, "Redis thousand instructions per read key (callgrind):", rows_ir)
            await svc.aclose()
            return
        cpu1 = r.info("cpu")
        rows = {k: round(v / n, 1) for k, v in sorted(per.items())}
        print(tree, "Redis us per key:", rows, "total", round(sum(per.values()) / n, 1))
        # The server's own CPU (user + sys, from INFO cpu): not inflated by a loaded machine's
        # preemption as the commandstats times are; and the commands scripts ran, per key.
        used = sum(cpu1[f] - cpu0[f] for f in ("used_cpu_user", "used_cpu_sys"))
        calls = {
            k[8:]: int(v["calls"])
            for k, v in r.info("commandstats").items()
            if not k.startswith(("cmdstat_eval", "cmdstat_info", "cmdstat_config"))
        }
        print(tree, "Redis process CPU us per key:", round(used * 1e6 / n, 1),
              "commands per key:", round(sum(calls.values()) / n, 1))  # fmt: skip
        rows = {k: round(v * 1e6 / n, 1) for k, v in sorted(cpu_per.items())}
        print(tree, "Redis process CPU us per key, by script (INFO cpu around each call):", rows)
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:12]
        print(tree, "commands per batch of 128:", {k: round(c / 19) for k, c in top})
        await reads(svc, r, tree)
        await svc.aclose()
    finally:
        proc.kill()
        proc.wait()


def _eval_usec(r: Any) -> int:
    stats = r.info("commandstats")
    return sum(int(v["usec"]) for k, v in stats.items() if k.startswith("cmdstat_eval"))


def _inner_calls(r: Any) -> int:
    """Commands the scripts ran (every command but the scripts and INFO): a count, not a time."""
    stats = r.info("commandstats")
    skip = ("cmdstat_eval", "cmdstat_info", "cmdstat_ping")
    return sum(int(v["calls"]) for k, v in stats.items() if not k.startswith(skip))


def _cpu_usec(r: Any) -> float:
    """CPU time of the server's main thread (getrusage: not inflated when it waits for a core)."""
    cpu = r.info("cpu")
    return (cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]) * 1e6


async def reads(svc: Any, r: Any, tree: str, grind: Any = None) -> dict[str, int]:
    """Redis CPU per key of batch_exist_key (present and absent) and batch_get_replica_list over
    stored MLA keys (one object per block) and MHA TP 4 keys (8 objects per block), radix on,
    chains of 64 blocks: 10 batches of 128, each called 3 times, every call checked before it
    counts. ``calls``: the commands the scripts ran per key (a count, free of noise); ``cpu``:
    the server main thread's CPU time over the 30 calls (INFO cpu, getrusage, with the
    connection handling of each call); ``min`` / ``median``: the scripts' commandstats time per
    call, which is wall time inside the command, so a shared machine's preemptions inflate it
    (the minimum shows through them). ``grind`` (callgrind mode: (zero, dump) callables): each
    batch called once, zeroed before and dumped after its call under the label
    ``<fmt> <name>``. Returns the keys read per label."""
    from mooncake_redis.models import ReplicateConfig

    def blk(i: int, salt: str) -> str:
        return uuid.uuid5(uuid.NAMESPACE_OID, f"{salt}{i}").hex * 2

    rows: dict[str, float] = {}
    counted: dict[str, int] = {}
    for fmt, per_block in (("mla", 1), ("mha", 8)):
        pairs: list[tuple[str, str]] = []
        i = 0
        while len(pairs) < 10 * 128:
            parent = blk(i - 1, fmt) if i % 64 else ""
            b = blk(i, fmt)
            ks = [b] if per_block == 1 else [f"{b}_{t}_{kv}" for t in range(4) for kv in "kv"]
            pairs.extend((k, parent) for k in ks)
            i += 1
        batches = [pairs[j : j + 128] for j in range(0, len(pairs), 128)]
        for b in batches:
            ks = [k for k, _ in b]
            cfgs = [ReplicateConfig(parent_block_hash=p) for _, p in b]
            res = await svc.batch_put_start("c", ks, [[64]] * len(ks), cfgs)
            assert all(isinstance(x, list) for x in res), res[:3]
            assert await svc.batch_put_end("c", ks) == [None] * len(ks)
        await svc.batch_exist_key([batches[0][0][0]])  # scripts loaded
        await svc.batch_get_replica_list([batches[0][0][0]])
        rounds = 1 if grind else 3
        for name in ("exist", "get_replicas", "exist_absent"):
            per_call: list[float] = []
            cpu0, calls0 = _cpu_usec(r), _inner_calls(r)
            for _ in range(rounds):
                for b in batches:
                    ks = [k for k, _ in b]
                    before = _eval_usec(r)
                    if grind:
                        grind[0]()
                    if name == "exist":
                        assert await svc.batch_exist_key(ks) == [True] * len(ks)
                    elif name == "exist_absent":
                        absent = [k + "-absent" for k in ks]
                        assert await svc.batch_exist_key(absent) == [False] * len(ks)
                    else:
                        got = await svc.batch_get_replica_list(ks)
                        assert all(len(g.replicas) == 1 for g in got), got[:3]
                    if grind:
                        grind[1](f"{fmt} {name}")
                    per_call.append((_eval_usec(r) - before) / len(ks))
            counted[f"{fmt} {name}"] = rounds * len(pairs)
            rows[f"{fmt} {name} cpu"] = round((_cpu_usec(r) - cpu0) / (rounds * len(pairs)), 2)
            rows[f"{fmt} {name} calls"] = round(
                (_inner_calls(r) - calls0) / (rounds * len(pairs)), 2
            )
            per_call.sort()
            rows[f"{fmt} {name} min"] = round(per_call[0], 2)
            rows[f"{fmt} {name} median"] = round(per_call[len(per_call) // 2], 2)
    if not grind:
        print(tree, "Redis us per read key:", rows)
    else:
        print(
            tree, "commands per read key:", {k: v for k, v in rows.items() if k.endswith("calls")}
        )
    return counted


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
