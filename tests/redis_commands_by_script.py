"""Redis commands per put key, by the script that ran them (MONITOR), for the chain puts of
``tests/redis_cpu_per_key.py``: 10 batches of 128 MLA keys, each with its parent, 64 shards,
after two such batches that load every script.

    REDIS_CMD_PORT=<port of a private redis-server> python3 tests/redis_commands_by_script.py <tree>

The server is flushed first. Not a test (no ``test_`` prefix): a measuring tool for
docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import threading
import time
import uuid
from typing import Any


def main() -> None:
    tree = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    sys.path.insert(0, tree)
    import redis

    from mooncake_redis import Config, MasterService
    from mooncake_redis.lua_loader import load_all
    from mooncake_redis.models import ReplicateConfig, Segment

    port = int(os.environ["REDIS_CMD_PORT"])
    names = {s.sha(w): n for n, s in load_all(tree + "/lua").items() for w in (False, True)}
    r = redis.Redis(port=port)
    r.flushall()
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    on, stop = threading.Event(), threading.Event()

    def monitor() -> None:
        script = "?"
        with r.monitor() as m:
            for cmd in m.listen():
                if stop.is_set():
                    return
                words = cmd["command"].split()
                if words[0] in ("EVALSHA", "EVAL"):
                    script = names.get(words[1], words[1][:8])
                elif on.is_set() and cmd.get("client_type") == "lua":
                    counts[(script, words[0].upper())] += 1

    threading.Thread(target=monitor, daemon=True).start()
    time.sleep(0.5)

    async def run() -> None:
        url = f"redis://127.0.0.1:{port}"
        cfg = Config(namespace="p", num_shards=64, enable_radix_tree=True, redis_url=url)
        svc = await MasterService.from_url(url, cfg)
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 34), "c")
        keys = [uuid.uuid4().hex * 2 for _ in range(128 * 13)]
        await svc.batch_put_start("c", keys[:128], [[64]] * 128)
        await svc.batch_put_end("c", keys[:128])
        for i in range(1, 13):
            if i == 3:  # batches 1 and 2 loaded every script (a first call is an EVAL)
                await asyncio.sleep(0.3)
                on.set()
            b = keys[i * 128 : (i + 1) * 128]
            parents = [keys[i * 128 - 1] if i % 2 else "", *b[:-1]]
            cfgs = [ReplicateConfig(parent_block_hash=p) for p in parents]
            res: list[Any] = await svc.batch_put_start("c", b, [[64]] * 128, cfgs)
            assert all(isinstance(x, list) for x in res), res[:3]
            assert await svc.batch_put_end("c", b) == [None] * 128
        await asyncio.sleep(0.5)
        on.clear()
        await svc.aclose()

    asyncio.run(run())
    stop.set()
    n = 10 * 128
    per: collections.Counter[str] = collections.Counter()
    for (script, _), v in counts.items():
        per[script] += v
    print(tree, "commands per put key:", round(sum(counts.values()) / n, 2))
    for script, v in per.most_common():
        cmds = {c: round(x / n, 2) for (s, c), x in counts.most_common() if s == script}
        print(f"  {script:14s} {v / n:5.2f}  {cmds}")


if __name__ == "__main__":
    main()
