"""Redis instructions of the allocator's scripts per allocation, under callgrind.

``REDIS_CPU_PORT=<port> python3 tests/alloc_callgrind.py <source tree>`` imports mooncake_redis
from that tree, starts a redis-server under valgrind's callgrind on that port, mounts one
16 GiB segment and puts 4 batches of 128 keys of 64 bytes (seeded keys and put ids; one batch
before to load the scripts), then runs the janitor's reclaim (alloc_pending, alloc_confirm)
once the commit deadline has passed and removes every key (alloc_free), and prints the
thousand instructions per allocation of each script (every call dumped apart with
callgrind_control). A count that the machine's load does not move; the put path's other
scripts are left to tests/redis_cpu_per_key.py. Not a test: the figures of the allocator's
rework in docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import uuid
from typing import Any

from grind import GrindServer  # tests/grind.py: the script's own directory

SCRIPTS = ("alloc_reserve", "alloc_pending", "alloc_confirm", "alloc_free")


async def main(tree: str) -> None:
    sys.path.insert(0, tree)
    random.seed(5)
    rng = random.Random(7)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # type: ignore[assignment]
    from mooncake_redis import Config, MasterService
    from mooncake_redis.models import Segment

    port = int(os.environ["REDIS_CPU_PORT"])
    server = GrindServer(port, "--hz", "1")
    ctl = server.ctl
    try:
        server.ready()
        url = f"redis://127.0.0.1:{port}"
        cfg = Config(namespace="a", num_shards=64, enable_radix_tree=True, redis_url=url,
                     alloc_commit_deadline_ms=3000, alloc_reclaim_grace_ms=10**9)  # fmt: skip
        svc = await MasterService.from_url(url, cfg)
        await svc.mount_segment(Segment("s", "s", 1 << 40, 1 << 34), "c")
        orig = svc.backend.call
        lock = asyncio.Lock()
        measured: list[str] = []  # the script of each dump, in order
        on = False

        async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
            async with lock:  # one script call at a time
                if not (on and name in SCRIPTS):
                    return await orig(name, keys, args, node)
                ctl("-z")
                res = await orig(name, keys, args, node)
                ctl("-d", name)
                measured.append(name)
                return res

        svc.backend.call = call  # type: ignore[method-assign]
        n = 4 * 128
        keys = [uuid.uuid4().hex * 2 for _ in range(n + 128)]
        await svc.batch_put_start("c", keys[n:], [[64]] * 128)  # scripts loaded
        await svc.batch_put_end("c", keys[n:])
        ctl("-i", "on")
        on = True
        for i in range(0, n, 128):
            res = await svc.batch_put_start("c", keys[i : i + 128], [[64]] * 128)
            assert all(isinstance(x, list) for x in res), res[:2]
            on = False
            await svc.batch_put_end("c", keys[i : i + 128])
            on = True
        await asyncio.sleep(3.1)  # past the commit deadline: every record is due
        await svc.janitor.reclaim_allocations()
        await svc.batch_remove(keys, force=True)
        await svc.drain_outboxes()
        on = False
        counts = server.counts()
        assert len(counts) == len(measured), (len(counts), len(measured))
        total: dict[str, int] = dict.fromkeys(SCRIPTS, 0)
        calls: dict[str, int] = dict.fromkeys(SCRIPTS, 0)
        for count, name in zip(counts, measured):
            total[name] += count
            calls[name] += 1
        # alloc_reserve made the n measured allocations; the janitor and the removal handle
        # the warm-up batch's 128 too.
        per = {k: round(v / (n if k == "alloc_reserve" else n + 128) / 1000, 1)
               for k, v in total.items()}  # fmt: skip
        print(tree, "Redis thousand instructions per allocation (callgrind):", per,
              "calls:", calls)  # fmt: skip
        await svc.aclose()
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "."))
