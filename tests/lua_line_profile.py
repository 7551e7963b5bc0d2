"""Lua VM instructions per script line, from the embedded store (fakeredis runs the same Lua 5.1
bytecode as Redis, through lupa): where a script's interpreter work goes, line by line.

``python3 tests/lua_line_profile.py <source tree> put|exist|get|evict [lines]`` imports
mooncake_redis from that tree, stores 1 batch of 128 MLA keys (5 for reads and eviction;
bench.common.populate: chains of 256 blocks, each with its parent, as tests/redis_cpu_per_key.py),
then counts, with a Lua count hook on every VM instruction, the instructions each script line ran
during 4 more batch puts (``put``), during batch_exist_key / batch_get_replica_list over 4 stored
batches (``exist``, ``get``), or during eviction passes (``evict_once``) of 512 of the stored
objects (``evict``: per evicted object). Prints the instructions per key by script, then the
``lines`` busiest lines (default 40) with their source. ``LUA_PROFILE_SHARDS`` sets the shard
count (default 64, the count of the earlier figures; 0 is the store's default, 1 on one Redis).

Not Redis's cost: a C function a line calls (a redis.call, string.format, a table resize) counts
as one instruction here and can cost thousands in Redis. Use it beside tests/redis_cpu_per_key.py
(callgrind, which counts Redis's own instructions) to tell the interpreter's share from the rest.
Not a test: a measuring tool behind docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from typing import Any

HOOK = """
function(counts)
  debug.sethook(function()
    local info = debug.getinfo(2, 'Sl')
    if info then
      local k = info.source .. '\\0' .. info.currentline
      counts[k] = (counts[k] or 0) + 1
    end
  end, '', 1)
end
"""
UNHOOK = "function() debug.sethook() end"


async def main(tree: str, what: str, top: int) -> None:
    sys.path.insert(0, tree)
    from mooncake_redis import Config, MasterService, backend
    from mooncake_redis.bench.common import CLIENT, populate
    from mooncake_redis.lua_loader import load_all
    from mooncake_redis.models import Segment

    url = "fakeredis://lua-line-profile"
    shards = int(os.environ.get("LUA_PROFILE_SHARDS", "64"))
    cfg = Config(namespace="prof", redis_url=url, enable_radix_tree=True, num_shards=shards)
    svc = await MasterService.from_url(url, cfg)
    await svc.mount_segment(Segment("s", "s", 1 << 44, 1 << 36), CLIENT)

    async def put(batches: int, salt: str) -> list[str]:
        """Batch-128 puts, chains of 256 blocks (bench.common.populate checks every answer)."""
        return await populate(svc, batches * 128, chain=256, value_size=64, salt=salt)

    await put(1, "warm")  # the server's Lua runtime exists from the first script on
    server: Any = backend._FAKE_SERVERS["lua-line-profile"]
    runtime = server._lua_runtime
    # Each script under its own chunk name (fakeredis compiles them all as "<python>").
    names = {s.body.strip(): name for name, s in load_all().items()}
    sources: dict[str, list[str]] = {}
    run_named = runtime.eval("function(s, name) return assert(loadstring(s, '=' .. name))() end")

    class Named:
        def __getattr__(self, attr: str) -> Any:
            return getattr(runtime, attr)

        def execute(self, script: Any) -> Any:
            if isinstance(script, str):
                return runtime.execute(script)
            name = names.get(script.decode(errors="replace").strip(), "?")
            sources[name] = script.decode(errors="replace").split("\n")
            return run_named(script, name.encode())

    server._lua_runtime = Named()
    keys = [] if what == "put" else await put(4, "read")
    counts = runtime.table()
    runtime.eval(HOOK)(counts)
    if what == "put":
        await put(4, "put")
    evicted = 0
    while what == "evict" and evicted < 512:
        r = await svc.evict_once(max_objects=512 - evicted)
        assert r.evicted_objects > 0, r
        evicted += r.evicted_objects
    for i in range(len(keys) // 128 if what in ("exist", "get") else 0):
        batch = keys[i * 128 : (i + 1) * 128]
        if what == "exist":
            assert await svc.batch_exist_key(batch) == [True] * 128
        else:
            got = await svc.batch_get_replica_list(batch)
            assert all(getattr(r, "replicas", None) for r in got), got[:2]
    runtime.eval(UNHOOK)()
    n = 4 * 128
    by_script: collections.Counter[str] = collections.Counter()
    by_line: collections.Counter[tuple[str, int]] = collections.Counter()
    for k, v in counts.items():
        src, line = k.rsplit(b"\0", 1)
        name = src.decode().lstrip("=")
        by_script[name] += v
        by_line[(name, int(line))] += v
    print(tree, f"{what}: Lua VM instructions per key, by script:")
    for name, v in by_script.most_common():
        print(f"  {name:20s} {v / n:8.1f}")
    for (name, line), v in by_line.most_common(top):
        text = sources.get(name, [])
        src_line = text[line - 1].strip() if 0 < line <= len(text) else ""
        print(f"  {v / n:7.1f}  {name}:{line}: {src_line[:110]}")
    await svc.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 40))
