"""Server instructions of single Lua script calls and operations (callgrind), a measuring tool.

``python3 tests/lua_op_cost.py <source tree> [port]`` starts a throwaway ``redis-server`` under
valgrind's callgrind, runs each ad-hoc script below 10 times (``EVALSHA``, one key) and prints the
instructions per call and per operation: what a ``redis.call``, an ARGV argument, a string or a
table costs inside a script, and the fixed cost of the includes of ``put_start.lua`` (everything
before its first line). Not a test: the figures behind docs/benchmarks.md "What a Redis Lua step
costs". Needs valgrind (Debian ``valgrind``); a shared machine's load does not move the counts.
"""

from __future__ import annotations

import re
import socket
import sys
import time

from grind import GrindServer  # tests/grind.py: the script's own directory

KEY = "65a9e0af3cab28c6bccb90f0a55988e240c5273047913a1e3906cb783b4bd968"
UNHEX = (
    "local U = setmetatable({}, { __index = function(t, x) local b = string.char(tonumber(x, 16))"
    " rawset(t, x, b) return b end }) "
)
HEX = (
    "local X = setmetatable({}, { __index = function(t, b) local x = string.format('%02x',"
    " string.byte(b)) rawset(t, b, x) return x end }) "
)


def experiments(tree: str) -> dict[str, tuple[str, int, int]]:
    """name -> (script, operations per call, ARGV count)."""
    sys.path.insert(0, tree)
    from mooncake_redis import lua_loader

    body = lua_loader.load_all()["put_start"].body
    preamble = body[: body.index("local num_shards")]
    loop = "for i = 1, 128 do {} end return 1"
    return {
        "EVALSHA of return 1": ("return 1", 1, 3),
        "put_start's includes": (preamble + "\nreturn 1", 1, 3),
        "ARGV of 2,000 arguments": ("return 1", 2000, 2000),
        "HSET new key, 16 fields": (
            loop.format(
                "redis.call('HSET', KEYS[1] .. i, 'a', '1', 'b', '2', 'c', '3', 'd', '4',"
                " 'e', '5', 'f', '6', 'g', '7', 'h', '8', 'i', '9', 'j', '10', 'k', '11',"
                " 'l', '12', 'm', '13', 'n', '14', 'o', '15', 'p', '16')"
            ),
            128,
            3,
        ),
        "HMGET 3 fields": (loop.format("redis.call('HMGET', KEYS[1] .. i, 'a', 'b', 'c')"), 128, 3),
        "string ..": ("local t = {} " + loop.format("t[i] = KEYS[1] .. ':o:' .. ARGV[1]"), 128, 3),
        "string.format %d": (
            "local t = {} " + loop.format("t[i] = string.format('%d', 1796165587758 + i)"),
            128,
            3,
        ),
        "tonumber": ("local s = 0 " + loop.format("s = s + tonumber(ARGV[2])"), 128, 3),
        "string.gsub": (
            "local t = {} " + loop.format("t[i] = string.gsub(ARGV[3], '^0+', '')"),
            128,
            3,
        ),
        "table of 4": ("local t = {} " + loop.format("t[i] = {i, 'a', 'b', i}"), 128, 3),
        # a 64-hex hash <-> its 32 bytes (radix.lua's parent and child fields), per call: the
        # gsub tables are filled on first use in every call, as radix.lua's are
        "is 64 hex (find)": (
            "local t = {} " + loop.format("t[i] = string.find(ARGV[1], '^[0-9a-f]+$')"),
            128,
            3,
        ),
        "hex -> bytes (gsub table)": (
            UNHEX + "local t = {} " + loop.format("t[i] = string.gsub(ARGV[1], '..', U)"),
            128,
            3,
        ),
        "bytes -> hex (format)": (
            "local b = string.gsub(ARGV[1], '..', function(x) return string.char(tonumber(x, 16))"
            " end) local t = {} " + loop.format("t[i] = string.format(F32, string.byte(b, 1, 32))"),
            128,
            3,
        ),
        "bytes -> hex (gsub table)": (
            HEX + "local b = string.gsub(ARGV[1], '..', function(x) return string.char("
            "tonumber(x, 16)) end) local t = {} " + loop.format("t[i] = string.gsub(b, '.', X)"),
            128,
            3,
        ),
    }


def main(tree: str, port: int) -> None:
    exps = experiments(tree)
    server = GrindServer(port)
    try:
        r = server.ready()
        server.ctl("-i", "on")
        for name, (script, _, nargs) in exps.items():
            args = [KEY, "1796165587766", "00000000006d000"] + ["x" * 16] * (nargs - 3)
            script = script.replace("F32", "'" + "%02x" * 32 + "'")
            sha = r.script_load(script)
            r.evalsha(sha, 1, "{t:1}", *args)  # warm: the server compiled it
            server.ctl("-z")
            for _ in range(10):
                r.evalsha(sha, 1, "{t:1}", *args)
            server.ctl(
                "-d", re.sub(r"\W+", "_", name)
            )  # a plain trigger name: callgrind drops others
            r.flushall()
        deadline = time.monotonic() + 30  # the last dump may still be being written
        while len(server.counts()) < len(exps) and time.monotonic() < deadline:
            time.sleep(0.2)
        for count, (name, (_, per, _)) in zip(server.counts(), exps.items()):
            n = count / 10
            print(f"{name:28s} {n / 1000:10.1f} k per call {n / per / 1000:9.2f} k per operation")
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else _free_port())
