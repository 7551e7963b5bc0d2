"""Redis CPU per key of batch puts, by script, from INFO commandstats on a throwaway redis-server.

``python3 tests/redis_cpu_per_key.py <source tree>`` imports mooncake_redis from that tree (e.g.
``.``, or a checkout of an older commit), puts 19 batches of 128 keys (chains of 256 blocks, one
parent per key, put_start + put_end) and prints the microseconds of Redis CPU per key for each
script. Not a test: the measuring tool behind the figure in docs/store.md; run two trees back
to back to compare them on the same machine state.
"""

from __future__ import annotations

import asyncio
import collections
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(tree: str) -> None:
    sys.path.insert(0, tree)
    from mooncake_redis import Config, MasterService
    from mooncake_redis.models import ReplicateConfig, Segment

    port = _port()
    binary = shutil.which("redis-server") or "redis-server"
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir",
         tempfile.mkdtemp()],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        r = redis.Redis(port=port)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        url = f"redis://127.0.0.1:{port}"
        cfg = Config(namespace="p", num_shards=64, enable_radix_tree=True, redis_url=url)
        svc = await MasterService.from_url(url, cfg)
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

        async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
            before, c0 = usec(), cpu()
            res = await orig(name, keys, args, node)
            per[name] += usec() - before
            cpu_per[name] += cpu() - c0
            return res

        svc.backend.call = call  # type: ignore[method-assign]
        keys = [uuid.uuid4().hex * 2 for _ in range(128 * 20)]
        await svc.batch_put_start("c", keys[:128], [[64]] * 128)
        await svc.batch_put_end("c", keys[:128])
        per.clear()
        cpu_per.clear()
        r.config_resetstat()
        cpu0 = r.info("cpu")
        for i in range(1, 20):
            b = keys[i * 128 : (i + 1) * 128]
            parents = [keys[i * 128 - 1] if i % 2 else "", *b[:-1]]
            cfgs = [ReplicateConfig(parent_block_hash=p) for p in parents]
            res = await svc.batch_put_start("c", b, [[64]] * 128, cfgs)
            assert all(isinstance(x, list) for x in res), res[:3]
            assert await svc.batch_put_end("c", b) == [None] * 128
        n = 19 * 128
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
        await svc.aclose()
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
