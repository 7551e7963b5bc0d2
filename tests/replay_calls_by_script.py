"""Round trips of a replay, by script: how many calls each Lua script, plain command, pipeline
and INFO read took (the Python side pays one round trip each, about 50-100 us of its CPU on
redis-py: tests/round_trip_cpu.py).

``python3 tests/replay_calls_by_script.py <mooncake-redis replay arguments>`` runs the CLI's
replay in this process with the backend's ``call``, ``command``, ``execute`` and ``info``
counted, e.g. ``--trace ../shared/traces/conversation_trace.jsonl --target redis --redis-url
redis://127.0.0.1:<port> --capacity-blocks 10000 --limit 1500 --lease-ttl-ms 0 --json
--no-progress``; prints the counts on stderr after the replay's own output. Not a test: a
measuring tool behind docs/benchmarks.md.

With ``REPLAY_SLOWLOG=1`` it also prints Redis's own time per script (every command logged by
SLOWLOG with a 0 us threshold, summed by script sha): point it at a private redis-server, whose
slowlog settings it changes.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
from typing import Any

import redis

from mooncake_redis import backend as backend_module
from mooncake_redis.cli import main as cli_main
from mooncake_redis.lua_loader import load_all

Backend = backend_module.Backend
counts: collections.Counter[str] = collections.Counter()


def _counted(name: str, label: Any) -> None:
    method = getattr(Backend, name)

    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts[label(args)] += 1
        return await method(self, *args, **kwargs)

    setattr(Backend, name, wrapper)


def _redis_url() -> str:
    return sys.argv[sys.argv.index("--redis-url") + 1]


def _slowlog_start() -> None:
    r = redis.Redis.from_url(_redis_url())
    r.config_set("slowlog-max-len", 2_000_000)
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()


def _slowlog_report() -> None:
    r = redis.Redis.from_url(_redis_url())
    r.config_set("slowlog-log-slower-than", 10_000)
    names = {s.sha(w): n for n, s in load_all().items() for w in (False, True)}
    micros: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    for entry in r.slowlog_get(-1):
        cmd = entry["command"].split()
        label = names.get(cmd[1].decode(), "?") if cmd[0].upper() == b"EVALSHA" else cmd[0].decode()
        micros[label] += entry["duration"]
        calls[label] += 1
    r.slowlog_reset()
    total = sum(micros.values())
    for label, us in micros.most_common():
        n = calls[label]
        line = f"{us / 1e6:9.3f} s {100 * us / total:5.1f} % {n:8d} calls {us / n:9.1f} us/call"
        print(f"{line}  {label}", file=sys.stderr)
    # Commands a script runs are logged too (inside its own time): the script rows overlap them.
    print(
        f"{total / 1e6:9.3f} s of Redis in commands (scripts and their commands)", file=sys.stderr
    )


def main() -> None:
    slowlog = os.environ.get("REPLAY_SLOWLOG") == "1"
    if slowlog:
        _slowlog_start()
    _counted("call", lambda a: f"script {a[0]}")
    _counted("command", lambda a: f"command {a[0]}")
    _counted("execute", lambda a: f"pipeline {a[1] if len(a) > 1 else 'pipeline'}")
    _counted("info", lambda a: f"INFO {a[0]}")
    sys.argv = ["mooncake-redis", "replay", *sys.argv[1:]]
    with contextlib.suppress(SystemExit):
        cli_main()
    for label, n in counts.most_common():
        print(f"{n:9d} {label}", file=sys.stderr)
    print(f"{sum(counts.values()):9d} round trips in all", file=sys.stderr)
    if slowlog:
        _slowlog_report()


if __name__ == "__main__":
    main()
