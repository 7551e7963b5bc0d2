"""The allocator's stored state after a seeded workload, to compare two source trees.

``python3 tests/alloc_same_state.py <source tree> <redis url> <out.json> [seed]`` imports
mooncake_redis from that tree, runs a seeded workload of batch puts (mixed sizes, one and two
replicas, preferred segments), ends, revokes, removes, outbox drains, janitor confirms (a 1 s
commit deadline, the janitor after it), an unmount and a remount on four segments (1 GiB twice;
one past 2^52 bytes, so that extents and offsets cross the numbers / u64 strings boundary of
lua/includes/alloc.lua; one ending at byte 2^64 - 1 with sizes no double holds), and writes
every key of its namespace: type, encoding, its content in Redis' own order (HGETALL / ZRANGE /
LRANGE) and DUMP, with the times (13-digit ms) and the namespace masked (a DUMP is kept only
for a key with neither). Two trees that store the same state for the same calls write the same
file: ``cmp`` them. Put ids, the rotation starts and the keys come from the seed. Not a test:
the check behind the allocator rework's "same stored state" (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time
import uuid
from typing import Any

U64 = (1 << 64) - 1
BIG = (1 << 63) + 12345
EDGE = (1 << 52) + (1 << 24)
SIZES = [64, 64, 64, 100, 4096, 4096, 4097, 1 << 20, 3, (1 << 20) + 1]


def masked(text: str, ns: str) -> str:
    return re.sub(r"(?<![0-9a-f])1[0-9]{12}(?![0-9a-f])", "T", text.replace(ns, "NS"))


async def main(tree: str, url: str, out: str, seed: int) -> None:
    sys.path.insert(0, tree)
    rng = random.Random(seed)
    random.seed(seed)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # type: ignore[assignment]
    from mooncake_redis import Config, MasterService
    from mooncake_redis.models import ReplicateConfig, Segment

    ns = "same" + uuid.UUID(int=random.Random().getrandbits(128)).hex[:8]
    cfg = Config(
        namespace=ns, num_shards=8, enable_radix_tree=True, redis_url=url,
        alloc_commit_deadline_ms=1000, alloc_reclaim_grace_ms=10**9, script_batch_size=64,
    )  # fmt: skip
    svc = await MasterService.from_url(url, cfg)
    segs = [
        Segment("s1", "s1", 1 << 40, 1 << 30, "ep:1"),
        Segment("s2", "s2", 1 << 41, 1 << 30, "ep:2"),
        Segment("edge", "edge", 1 << 44, EDGE, "ep:3"),
        Segment("big", "big", U64 - BIG + 1, BIG, "ep:4"),
    ]
    for s in segs:
        await svc.mount_segment(s, "c")
    live: list[str] = []
    n = 0
    for rnd in range(14):
        if rnd == 2:  # push the edge segment's free extent across 2^52
            k = f"huge{rnd}"
            await svc.batch_put_start("c", [k], [[(1 << 52) - 4096 * 3]],
                                      [ReplicateConfig(preferred_segments=("edge",))])  # fmt: skip
            await svc.batch_put_end("c", [k])
            live.append(k)
        if rnd == 5:  # an object no double holds, in the big segment
            k = f"odd{rnd}"
            await svc.batch_put_start("c", [k], [[(1 << 53) + 1]],
                                      [ReplicateConfig(preferred_segments=("big",))])  # fmt: skip
            await svc.batch_put_end("c", [k])
            live.append(k)
        count = rng.randrange(20, 200)
        keys = [uuid.uuid4().hex * 2 for _ in range(count)]
        sizes = [[rng.choice(SIZES) if rng.random() < 0.8 else rng.randrange(1, 1 << 16)]
                 for _ in keys]  # fmt: skip
        cfgs = []
        for _ in keys:
            pref = rng.choice([(), (), (), ("edge",), ("s2", "s1"), ("big",)])
            cfgs.append(ReplicateConfig(replica_num=rng.choice([1, 1, 1, 2]),
                                        preferred_segments=pref))  # fmt: skip
        res = await svc.batch_put_start("c", keys, sizes, cfgs)
        ok = [k for k, r in zip(keys, res) if isinstance(r, list)]
        n += len(ok)
        rng.shuffle(ok)
        cut = len(ok) * 3 // 4
        await svc.batch_put_end("c", ok[:cut])
        revoke = ok[cut:]
        if rnd % 3 == 0:
            await svc.batch_put_revoke("c", revoke)
        else:
            live.extend(revoke)  # left processing: confirmed by the janitor below
        live.extend(ok[:cut])
        rng.shuffle(live)
        drop, live = live[: len(live) // 4], live[len(live) // 4 :]
        await svc.batch_remove(drop, force=True)
        await svc.drain_outboxes()
        time.sleep(1.1)  # every record older than the commit deadline (1 s)
        await svc.janitor.reclaim_allocations()
        if rnd == 9:
            await svc.unmount_segment("s2", "c")
            await svc.drain_outboxes()
            await svc.mount_segment(segs[1], "c")
    client = svc.backend.client
    rows: dict[str, Any] = {}
    async for raw in client.scan_iter(match="{" + ns + ":*", count=1000):
        key = raw.decode()
        kind = (await client.type(key)).decode()
        enc = (await client.object("encoding", key)).decode()
        if kind == "hash":
            pairs = (await client.hgetall(key)).items()  # in the hash's own order
            value: Any = [(f.decode("latin-1"), v.decode("latin-1")) for f, v in pairs]
        elif kind == "zset":
            value = [(m.decode("latin-1"), s) for m, s in
                     await client.zrange(key, 0, -1, withscores=True)]  # fmt: skip
        elif kind == "list":
            value = [x.decode("latin-1") for x in await client.lrange(key, 0, -1)]
        else:
            value = (await client.get(key) or b"").decode("latin-1")
        dump = (await client.dump(key) or b"").hex()
        text = json.dumps(value)
        # A DUMP holds the times as they are: compared only where no time is masked.
        same_dump = ns not in text and masked(text, ns) == text
        rows[masked(key, ns)] = [kind, enc, masked(text, ns), dump if same_dump else "-"]
    await svc.remove_all(force=True)
    await svc.aclose()
    with open(out, "w") as f:
        json.dump(dict(sorted(rows.items())), f, indent=0)
    print(tree, "puts", n, "keys", len(rows), "written to", out)


if __name__ == "__main__":
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], seed))
