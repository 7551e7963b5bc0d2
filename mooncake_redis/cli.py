"""``mooncake-redis``: one program, subcommands contributed by the modules that own them.

Each module in SUBCOMMAND_MODULES exposes ``register(subparsers)``, which adds its parsers and
sets ``func`` (args -> exit code). Options read ``MOONCAKE_REDIS_*`` variables as defaults.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMAND_MODULES = (
    "mooncake_redis.replay.commands",  # replay, demo
    "mooncake_redis.tools",  # inspect, fsck
    "mooncake_redis.server.commands",  # serve
    "mooncake_redis.eviction.commands",  # evictor
    "mooncake_redis.bench",  # bench
    "mooncake_redis.chaos",  # chaos
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mooncake-redis",
        description="Mooncake Store master metadata and radix-tree index on Redis.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # that part is not built into this version
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
