"""``mooncake-redis``: one program, subcommands contributed by the modules that own them.

Each module in SUBCOMMAND_MODULES exposes ``register(subparsers)``, which adds its parsers and
sets ``func`` (args -> exit code). Options read ``MOONCAKE_REDIS_*`` variables as defaults.
Every command runs under one guard (:func:`.common.run_command`): a failure is one line on
stderr, never a traceback; bad arguments are refused by the parser with the command's usage.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from .common import Parser, add_redis_url, run_command

SUBCOMMAND_MODULES = (
    "mooncake_redis.cli.replay",  # replay, demo
    "mooncake_redis.cli.inspect",  # inspect, fsck
    "mooncake_redis.cli.serve",  # serve
    "mooncake_redis.cli.evictor",  # evictor, bench-eviction
    "mooncake_redis.cli.bench",  # bench
    "mooncake_redis.cli.chaos",  # chaos
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mooncake-redis",
        description="Mooncake Store master metadata and radix-tree index on Redis.\n"
        "Every command takes --redis-url (default: the embedded store, or "
        "MOONCAKE_REDIS_REDIS_URL).",
    )
    add_redis_url(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
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
    if not hasattr(args, "redis_url"):
        args.redis_url = None
    return run_command(args.command, args.func, args)
