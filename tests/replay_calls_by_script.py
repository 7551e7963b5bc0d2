"""Round trips of a replay, by script: how many calls each Lua script, plain command, pipeline
and INFO read took (the Python side pays one round trip each, about 50-100 us of its CPU on
redis-py: tests/round_trip_cpu.py).

``python3 tests/replay_calls_by_script.py <mooncake-redis replay arguments>`` runs the CLI's
replay in this process with the backend's ``call``, ``command``, ``execute`` and ``info``
counted, e.g. ``--trace ../shared/traces/conversation_trace.jsonl --target redis --redis-url
redis://127.0.0.1:<port> --capacity-blocks 10000 --limit 1500 --lease-ttl-ms 0 --json
--no-progress``; prints the counts on stderr after the replay's own output. Not a test: a
measuring tool behind docs/benchmarks.md.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from typing import Any

from mooncake_redis import backend as backend_module
from mooncake_redis.cli import main as cli_main

Backend = backend_module.Backend
counts: collections.Counter[str] = collections.Counter()


def _counted(name: str, label: Any) -> None:
    method = getattr(Backend, name)

    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts[label(args)] += 1
        return await method(self, *args, **kwargs)

    setattr(Backend, name, wrapper)


def main() -> None:
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


if __name__ == "__main__":
    main()
