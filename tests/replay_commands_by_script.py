"""Redis commands of a lease-free trace replay, by the script that ran them (MONITOR).

    python3 tests/replay_commands_by_script.py <source tree> <port> [requests] [blocks]

Flushes the private ``redis-server`` on ``port``, replays the first ``requests`` (600) requests
of the conversation trace at ``blocks`` (2,000) blocks with leases of 0 ms (the choices then do
not depend on the machine's speed: two trees evict the same keys in the same passes), with
``redis-cli monitor`` attached, and prints per script its calls and the commands it ran, and
per evicted key the commands of the eviction scripts. A figure only for a replay whose reads
all succeeded, whose every missing block got a put answered, and that evicted something.
Not a test (no ``test_`` prefix): a measuring tool for docs/benchmarks.md.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE = HERE.parent.parent / "shared" / "traces" / "conversation_trace.jsonl"
LINE = re.compile(r'[\d.]+ \[\d+ (\S+)\] "(\w+)"(?: "([^"]*)")?')
EVICTION = ("evict_", "alloc_free", "outbox_ack", "segment_info")


def main(tree: str, port: int, requests: int, blocks: int) -> None:
    tree = os.path.abspath(tree)
    sys.path.insert(0, tree)
    from mooncake_redis.lua_loader import load_all

    names = {s.sha(w): n for n, s in load_all().items() for w in (False, True)}
    subprocess.run(["redis-cli", "-p", str(port), "flushall"], check=True, capture_output=True)
    log = Path(f"/tmp/replay_commands_{port}.txt")
    with log.open("w") as out:
        mon = subprocess.Popen(["redis-cli", "-p", str(port), "monitor"], stdout=out)
        time.sleep(0.3)
        try:
            args = ["replay", "--trace", str(TRACE), "--target", "redis", "--redis-url",
                    f"redis://127.0.0.1:{port}", "--capacity-blocks", str(blocks), "--limit",
                    str(requests), "--lease-ttl-ms", "0", "--json", "--no-progress",
                    "--sample-every", "1000000"]  # fmt: skip
            env = dict(os.environ, PYTHONPATH=tree)
            run = subprocess.run([sys.executable, "-m", "mooncake_redis.cli", *args], cwd=tree,
                                 env=env, capture_output=True, text=True, check=True)  # fmt: skip
            time.sleep(1)
        finally:
            mon.terminate()
            mon.wait()
    [r] = json.loads(run.stdout)
    assert r["reads_failed"] == 0, r
    assert r["puts_ok"] + r["puts_failed"] == r["misses"] and r["evicted_keys"] > 0, r
    calls: collections.Counter[str] = collections.Counter()
    inner: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    cur = "?"
    with log.open(errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            src, cmd, first = m.groups()
            cmd = cmd.upper()
            if src == "lua":
                inner[cur][cmd] += 1
            else:
                evalsha = cmd in ("EVALSHA", "EVALSHA_RO") and first is not None
                cur = names.get(first, "?") if evalsha and first is not None else cmd
                calls[cur] += 1
    log.unlink()
    total = sum(calls.values()) + sum(sum(c.values()) for c in inner.values())
    evicted = r["evicted_keys"]
    ev = sum(calls[s] + sum(inner[s].values()) for s in calls if s.startswith(EVICTION))
    print(f"{tree}: {r['evicted_keys']} evicted in {r['evictions']} passes, {r['puts_ok']} puts "
          f"ok / {r['puts_failed']} refused, {r['hits']} hits")  # fmt: skip
    print(f"  Redis commands: {total:,}; eviction scripts (calls + commands) per evicted key: "
          f"{ev / evicted:.1f}")  # fmt: skip
    for s, c in calls.most_common(25):
        n = sum(inner[s].values())
        top = ", ".join(f"{k} {v}" for k, v in inner[s].most_common(6))
        print(f"  {s:18s} {c:7d} calls {n:9d} commands ({n / c:6.1f} per call)  {top}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]) if len(a) > 2 else 600, int(a[3]) if len(a) > 3 else 2000)
