"""What running a script as a Redis function saves per call (a measuring tool behind
docs/benchmarks.md, not a test).

    python3 tests/function_call_cost.py <port>

Stores 1,000 MLA blocks (chains of 16, one shard) on a throwaway ``redis-server`` under
callgrind, then runs each call below 200 times as an EVAL script (EVALSHA of the script's EVAL
form, as the backend ran them before) and 200 times as its function (FCALL of ``library``), and
prints the server's instructions per call of each: a count that a loaded machine does not move.
The calls: ``exist`` and ``get_replicas`` of 1 key and of 128, ``evict_pending`` and
``segment_usage`` (a pass's and a put's small calls).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grind import GrindServer

from mooncake_redis.bench.common import fresh_service, mount, populate
from mooncake_redis.lua_loader import load_all


async def _store(url: str) -> tuple[str, list[str]]:
    svc = await fresh_service(url, enable_radix_tree=True)
    await mount(svc, 1 << 36, 1)
    await populate(svc, 1000, key_format="mla", chain=16)
    keys = sorted(await svc.complete_keys())
    assert len(keys) == 1000, len(keys)
    ns = svc.config.namespace
    await svc.aclose()
    return ns, keys


def main(port: int) -> None:
    grind = GrindServer(port)
    try:
        r = grind.ready()
        ns, keys = asyncio.run(_store(f"redis://127.0.0.1:{port}"))
        anchor, registry = f"{{{ns}:0}}:stats", f"{{{ns}}}:segments"
        one, many = keys[:1], keys[:128]
        head = [5000, 60000, 1]
        cases = [
            ("exist", [anchor], [*head, 1, anchor, 0, 1, *one], "exist, 1 key"),
            ("exist", [anchor], [*head, 1, anchor, 0, 128, *many], "exist, 128 keys"),
            ("get_replicas", [anchor], [*head, 1, anchor, 0, 1, *one], "get_replicas, 1 key"),
            ("get_replicas", [anchor], [*head, 1, anchor, 0, 128, *many], "get_replicas, 128"),
            ("evict_pending", [anchor], ["0", 1, anchor, 0, 0], "evict_pending"),
            ("segment_usage", [registry], [], "segment_usage"),
        ]
        scripts = load_all()
        grind.ctl("-i", "on")
        runs = []
        for name, ks, argv, label in cases:
            script = scripts[name]
            sha = r.script_load(script.source(True))
            fn, lib = script.function
            r.execute_command("FUNCTION", "LOAD", "REPLACE", lib)
            replies = []
            for form in ("EVAL", "FCALL"):
                cmd = ["EVALSHA", sha] if form == "EVAL" else ["FCALL", fn]
                replies.append(r.execute_command(*cmd, len(ks), *ks, *argv))
                for _ in range(20):  # warm
                    r.execute_command(*cmd, len(ks), *ks, *argv)
                grind.ctl("-z")
                for _ in range(200):
                    r.execute_command(*cmd, len(ks), *ks, *argv)
                grind.ctl("-d", f"{name}-{form}")
                runs.append((label, form))
            if name == "get_replicas":  # the lease each read grants: its own time
                replies = [[[*x[:3], *x[4:]] for x in rep] for rep in replies]
            assert replies[0] == replies[1], (label, replies)  # the same answer both ways
            if name in ("exist", "get_replicas"):  # every key found (a reply per key, all hits)
                assert len(replies[0]) == len(argv) - 7, label
                hit = (
                    all(x == 1 for x in replies[0])
                    if name == "exist"
                    else all(x[0] == 0 for x in replies[0])
                )
                assert hit, (label, replies[0][:2])
        time.sleep(1)
        counts = dict(zip(runs, grind.counts()))
        print("thousand instructions per call: EVAL script / function (saved)")
        for label in dict.fromkeys(lbl for lbl, _ in runs):
            e, f = counts[(label, "EVAL")] / 200e3, counts[(label, "FCALL")] / 200e3
            print(f"  {label:22s} {e:8.1f} / {f:8.1f} ({e - f:6.1f}, {100 * (e - f) / e:4.1f} %)")
    finally:
        grind.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]))
