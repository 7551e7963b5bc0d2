"""Options shared by the worker-side subcommands; every one also reads a MOONCAKE_REDIS_*
variable (the Config fields through :meth:`Config.from_env`, the rest listed in ENV_OPTIONS)."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from typing import Any

from ..config import ENV_PREFIX, Config

# CLI-only settings and the variables that provide their defaults (Config fields come on top).
ENV_OPTIONS: dict[str, str] = {
    "host": ENV_PREFIX + "HOST",
    "port": ENV_PREFIX + "PORT",
    "token": ENV_PREFIX + "TOKEN",
    "evictor": ENV_PREFIX + "EVICTOR",
    "fsck_interval": ENV_PREFIX + "FSCK_INTERVAL",
    "log_level": ENV_PREFIX + "LOG_LEVEL",
    "graceful_timeout": ENV_PREFIX + "GRACEFUL_TIMEOUT",
    "url": ENV_PREFIX + "URL",
}


def env(name: str, default: Any = None) -> Any:
    """The default of option ``name`` from its variable."""
    return os.environ.get(ENV_OPTIONS[name], default)


def known_env_names() -> set[str]:
    """Every MOONCAKE_REDIS_* name a worker-side command reads."""
    return {ENV_PREFIX + f.name.upper() for f in fields(Config)} | set(ENV_OPTIONS.values())


def add_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("store (also MOONCAKE_REDIS_<FIELD> for every Config field)")
    g.add_argument(
        "--redis-url",
        help="redis://, rediss:// (TLS), redis+cluster://, unix:// "
        "(env MOONCAKE_REDIS_REDIS_URL; user:password@ in the URL for ACL users)",
    )
    g.add_argument("--namespace", help="key namespace (env MOONCAKE_REDIS_NAMESPACE)")
    g.add_argument("--num-shards", type=int, help="env MOONCAKE_REDIS_NUM_SHARDS")
    g.add_argument(
        "--enable-radix-tree",
        action="store_true",
        default=None,
        help="register puts in the radix index (env MOONCAKE_REDIS_ENABLE_RADIX_TREE)",
    )


def config_from_args(args: argparse.Namespace) -> Config:
    return Config.from_env(
        redis_url=args.redis_url,
        namespace=args.namespace,
        num_shards=args.num_shards,
        enable_radix_tree=args.enable_radix_tree,
    )
