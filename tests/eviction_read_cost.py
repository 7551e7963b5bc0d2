"""What the eviction pass's reads cost (a measuring tool behind docs/benchmarks.md, not a test).

``python3 tests/eviction_read_cost.py <source tree> rows``
    Lua VM instructions per row of ``evict_ancestors`` (16 chains read 16 nodes up) and of
    ``evict_candidates`` (64 shards, ``want`` 58 and 0), on the embedded store (fakeredis runs
    the same Lua 5.1 bytecode through lupa), after storing 4,000 blocks in chains of 16. A C
    function a line calls counts as one instruction here: use it beside the two below.

``python3 tests/eviction_read_cost.py <source tree> replay <port> [requests] [blocks]``
    Redis instructions (callgrind, a throwaway ``redis-server`` on ``port``) of a lease-free
    replay of the first ``requests`` (300) requests of the conversation trace at ``blocks``
    (1,000) blocks: leases of 0 ms make the choices independent of the machine's speed, so two
    trees evict the same keys in the same passes; prints the evictions, passes, and the reads'
    calls and rows per pass. With ``EVICT_COST_SCRIPTS=<script>[,<script>...]`` only the calls
    of those scripts are counted (callgrind switched on around each, ``callgrind_control -i``,
    from a wrapper of ``Backend.call``); it also prints their calls. A window also counts a
    server cron tick that falls in it.

``python3 tests/eviction_read_cost.py <source tree> hex <port>``
    Microseconds per 64-hex <-> 32-byte conversion in Redis's Lua (EVAL on a running server on
    ``port``): a gsub table filled in the call (as a script's locals are, every call), the same
    table warm, and the table-free forms radix.lua uses.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRACE = HERE.parent.parent / "shared" / "traces" / "conversation_trace.jsonl"


async def rows(tree: str) -> None:
    sys.path.insert(0, tree)
    from lua_line_profile import HOOK, UNHOOK

    import mooncake_redis.lua_calls as lua
    from mooncake_redis import Config, MasterService, backend
    from mooncake_redis.bench.common import CLIENT, populate
    from mooncake_redis.models import Segment

    url = "fakeredis://eviction-read-cost"
    cfg = Config(namespace="cost", redis_url=url, enable_radix_tree=True, num_shards=64)
    svc = await MasterService.from_url(url, cfg)
    await svc.mount_segment(Segment("s", "s", 1 << 44, 1 << 36), CLIENT)
    await populate(svc, 4000, chain=16, value_size=4096)
    runtime = backend._FAKE_SERVERS["eviction-read-cost"]._lua_runtime
    cursors = [(sh, "", "") for sh in range(64)]
    _, windows, _ = await lua.evict_candidates(svc.ctx, cursors, 4, 80, 0)
    starts = [(r.parent, r.parent_shard, 16) for w in windows for r in w.rows if r.parent][:16]

    async def count(read: Any) -> None:
        counts = runtime.table()
        runtime.eval(HOOK)(counts)
        n = 0
        for _ in range(5):
            n += await read()
        runtime.eval(UNHOOK)()
        total = sum(v for _, v in counts.items())
        assert n > 0, "the reads found no row: nothing to measure"
        print(f"  {total / n:8.1f} VM instructions per row ({n} rows)")

    async def ancestors() -> int:
        return sum(len(chain) for chain in await lua.evict_ancestors(svc.ctx, starts))

    def candidates(want: int) -> Any:
        async def read() -> int:
            _, ws, _ = await lua.evict_candidates(svc.ctx, cursors, 4, 80, want)
            return sum(len(w.rows) for w in ws)

        return read

    print(tree, "evict_ancestors, 16 chains of 16:")
    await count(ancestors)
    for want in (58, 0):
        print(tree, f"evict_candidates, 64 shards, want {want}:")
        await count(candidates(want))
    await svc.aclose()


def replay(tree: str, port: int, requests: int, blocks: int) -> None:
    from grind import GrindServer

    probe = """
import collections, json, sys
import mooncake_redis.lua_calls as L
from mooncake_redis.replay import redis_target
c = collections.Counter()
oc, oa = L.evict_candidates, L.evict_ancestors
async def ec(*args, **kw):
    n, w, ahead = await oc(*args, **kw)
    c["candidate calls"] += 1; c["candidate rows"] += sum(len(x.rows) for x in w)
    if ahead is not None:
        c["read ahead rows"] += sum(len(x) for x in ahead[1])
    return n, w, ahead
async def ea(ctx, starts):
    r = await oa(ctx, starts)
    c["ancestor calls"] += 1; c["ancestor rows"] += sum(len(x) for x in r)
    return r
L.evict_candidates, L.evict_ancestors = ec, ea
import os, subprocess
from mooncake_redis import backend
want = set(filter(None, os.environ.get("EVICT_COST_SCRIPTS", "").split(",")))
grind_pid, call = os.environ.get("EVICT_COST_PID", ""), backend.Backend.call
def instrument(state):
    subprocess.run(["callgrind_control", "-i", state, grind_pid], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
async def counted(self, name, keys, args, node=None):
    if name not in want:
        return await call(self, name, keys, args, node)
    c["script calls"] += 1
    instrument("on")
    try:
        return await call(self, name, keys, args, node)
    finally:
        instrument("off")
if want:
    backend.Backend.call = counted
close = redis_target.RedisTarget.close
async def report(self):
    m = self.svc.eviction_metrics
    per = {k: round(v / max(1, m.passes), 2) for k, v in c.items() if k != "script calls"}
    if want:
        per["script calls (all)"] = c["script calls"]
    print(json.dumps({"evicted": m.evicted_keys, "passes": m.passes, "per pass": per}),
          file=sys.stderr)
    await close(self)
redis_target.RedisTarget.close = report
from mooncake_redis.cli import main
sys.exit(main())
"""
    scripts = os.environ.get("EVICT_COST_SCRIPTS", "")
    grind = GrindServer(port)
    try:
        grind.ready()
        if not scripts:
            grind.ctl("-i", "on")
        grind.ctl("-z")
        args = ["replay", "--trace", str(TRACE), "--target", "redis", "--redis-url",
                f"redis://127.0.0.1:{port}", "--capacity-blocks", str(blocks), "--limit",
                str(requests), "--lease-ttl-ms", "0", "--json", "--no-progress"]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=tree, EVICT_COST_PID=str(grind.proc.pid))
        out = subprocess.run([sys.executable, "-c", probe, *args], cwd=tree, env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
        grind.ctl("-d", "replay")
        time.sleep(1)
        # A figure only for a replay whose reads all succeeded, whose every missing block got a
        # put answered (at 1,000 blocks the store refuses some: 682 of 8,191 in 300 requests),
        # and that evicted what it stored.
        [result] = json.loads(out.stdout)
        assert result["reads_failed"] == 0, result
        assert result["puts_ok"] + result["puts_failed"] == result["misses"], result
        assert result["puts_ok"] > 0 and result["evicted_keys"] > 0, result
        what = f" in {scripts}" if scripts else ""
        print(tree, f"Redis instructions{what}: {sum(grind.counts()) / 1e9:.3f} G")
        print(" ", out.stderr.strip().splitlines()[-1])
    finally:
        grind.stop()


HEX_SETUP = """
local s = ''
for i = 1, 32 do s = s .. string.char((i * 37) % 256) end
local h = 'a3f09b1c77e2d4560918bc3aef12d09c44e8a1b2c3d4e5f60718293a4b5c6d7e'
local n = tonumber(ARGV[1])
local x
local function hex_table()
  return setmetatable({}, { __index = function(t, b)
    local v = string.format('%02x', string.byte(b)); rawset(t, b, v); return v end })
end
local function unhex_table()
  return setmetatable({}, { __index = function(t, d)
    local v = string.char(tonumber(d, 16)); rawset(t, d, v); return v end })
end
"""
HEX_VARIANTS = {
    "bytes -> hex, gsub table filled in the call": (
        "for k = 1, n do x = string.gsub(s, '.', hex_table()) end return x"
    ),
    "bytes -> hex, gsub table warm": (
        "local T = hex_table() for k = 1, n do x = string.gsub(s, '.', T) end return x"
    ),
    "bytes -> hex, radix_hex32 (struct.unpack, one format)": (
        "for k = 1, n do x = radix_hex32(s) end return x"
    ),
    "hex -> bytes, gsub table filled in the call": (
        "for k = 1, n do x = string.gsub(h, '..', unhex_table()) end return x"
    ),
    "hex -> bytes, gsub table warm": (
        "local T = unhex_table() for k = 1, n do x = string.gsub(h, '..', T) end return x"
    ),
    "hex -> bytes, radix_unhex32 (one struct.pack)": (
        "for k = 1, n do x = radix_unhex32(h) end return x"
    ),
}


def hex_cost(tree: str, port: int) -> None:
    import redis

    sys.path.insert(0, tree)
    from mooncake_redis.lua_loader import expand, lua_dir, strip_comment_lines

    # The table-free variants are radix.lua's own functions, from the tree measured.
    radix = strip_comment_lines(expand("--!include radix.lua", lua_dir() / "includes"))
    r = redis.Redis(port=port)
    n = 20_000
    answers: dict[str, set[bytes]] = collections.defaultdict(set)
    for name, body in HEX_VARIANTS.items():
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            answers[name.split(",")[0]].add(r.eval(radix + HEX_SETUP + body, 0, n))
            best = min(best, time.perf_counter() - t)
        print(f"  {name:54s} {best / n * 1e6:6.2f} us")
    assert all(len(v) == 1 for v in answers.values()), answers


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    tree, what = sys.argv[1], sys.argv[2]
    if what == "rows":
        asyncio.run(rows(tree))
    elif what == "replay":
        extra = [int(a) for a in sys.argv[4:]]
        replay(tree, int(sys.argv[3]), *(extra + [300, 1000][len(extra) :]))
    else:
        hex_cost(tree, int(sys.argv[3]))
