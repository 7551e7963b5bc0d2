"""What every subcommand shares: argument types that refuse bad values in the parser, the one
Redis URL variable, a parser whose errors show the subcommand's usage and whose help shows the
defaults, and the guard that turns a failure into one line instead of a traceback.

Exit codes of every command: 0 done, 1 done but something is wrong (fsck not clean, inspect
found nothing, chaos counted violations), 2 bad usage or could not run, 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..backend import redact
from ..errors import ErrorCode, MooncakeError

URL_VAR = "MOONCAKE_REDIS_REDIS_URL"  # the variable of Config.redis_url: every command reads it
OLD_URL_VAR = "MOONCAKE_REDIS_URL"  # what replay, demo and bench read before; still accepted
EMBEDDED = "fakeredis://"
TRACEBACK_VAR = "MOONCAKE_REDIS_TRACEBACK"  # 1: let unexpected errors raise with a traceback
URL_HELP = (
    "redis://[user:password@]host:port, rediss:// (TLS), redis+cluster://, unix://, or "
    f"fakeredis:// (embedded, this process only; the default); env {URL_VAR}"
)

RPC_FAIL = ErrorCode.RPC_FAIL  # what the backend raises when Redis does not answer

_warned: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr, once per process."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr)


def env_redis_url() -> str | None:
    """The Redis URL from the environment: MOONCAKE_REDIS_REDIS_URL, or the old
    MOONCAKE_REDIS_URL with a deprecation warning; None when neither is set."""
    url = os.environ.get(URL_VAR)
    if url:
        return url
    old = os.environ.get(OLD_URL_VAR)
    if old:
        warn(f"{OLD_URL_VAR} is deprecated: set {URL_VAR} instead (every command reads it)")
        return old
    return None


def redis_url(explicit: str | None, default: str = EMBEDDED) -> str:
    """--redis-url, else the environment, else the embedded store."""
    return explicit or env_redis_url() or default


def describe_store(url: str | None) -> str:
    """How a report names the store: embedded, or the URL with its password masked."""
    if not url or url.startswith("fakeredis://"):
        return "embedded store"
    if url.startswith("fakeredis+tcp://"):
        return "embedded store at " + url.split("://", 1)[1]
    try:
        return redact(url)
    except ValueError:  # a malformed URL: show only its scheme
        return url.split("://", 1)[0] + "://..."


# -- parser ------------------------------------------------------------------------------------


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions in paragraphs (an indented line is kept as written, for commands); every
    option's default in its help unless the help says it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for para in text.strip("\n").split("\n\n"):
            lines = para.splitlines()
            if any(line.startswith(" ") for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent,
                                         subsequent_indent=indent))  # fmt: skip
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or "default" in text
            or action.nargs == 0
        ):
            return action.help
        shown = ",".join(map(str, default)) if isinstance(default, list | tuple) else default
        return f"{text} (default: {str(shown).replace('%', '%%')})".lstrip()


class Parser(argparse.ArgumentParser):
    """Unknown arguments are an error of the (sub)command that got them, with its usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


# -- argument types ----------------------------------------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def port(text: str) -> int:
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 1-65535, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def positive_int_list(text: str) -> list[int]:
    """``60,120,240``: comma-separated positive integers."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"comma-separated positive integers, got {text!r}")
    try:
        return [positive_int(p) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"comma-separated positive integers, got {text!r}"
        ) from None


def choice_list(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """``a,b``: a comma-separated subset of ``choices``."""

    def parse(text: str) -> list[str]:
        names = [p.strip() for p in text.split(",") if p.strip()]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"comma-separated names from {','.join(choices)}, got {text!r}"
            )
        return names

    return parse


def scoring(text: str) -> str:
    """A leaf scoring policy the eviction policy registry knows (``lru``, ``lru-freq:W``...)."""
    from ..eviction.policy import get_policy

    try:
        get_policy(text)
    except MooncakeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def log_level(text: str) -> str:
    levels = ("debug", "info", "warning", "error", "critical")
    if text.lower() not in levels:
        raise argparse.ArgumentTypeError(f"one of {', '.join(levels)}, got {text!r}")
    return text.lower()


def add_redis_url(p: argparse.ArgumentParser | Any, help: str = URL_HELP) -> None:
    """``--redis-url`` that may stand before the subcommand, after it, or after a nested one:
    no default of its own (the value is resolved by :func:`redis_url`)."""
    p.add_argument("--redis-url", default=argparse.SUPPRESS, metavar="URL", help=help)


# -- the guard ---------------------------------------------------------------------------------


def _one_line(exc: BaseException, url: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        from urllib.parse import urlsplit

        password = urlsplit(url).password
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text


def run_command(name: str, func: Callable[[argparse.Namespace], int], args: Any) -> int:
    """Runs a subcommand; a failure is one line on stderr and exit 2, never a traceback
    (``MOONCAKE_REDIS_TRACEBACK=1`` re-raises unexpected errors for a bug report)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisClusterException, RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    url = redis_url(getattr(args, "redis_url", None))
    try:
        return int(func(args))
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except MooncakeError as exc:
        where = f"cannot reach Redis at {describe_store(url)}: " if exc.code == RPC_FAIL else ""
        print(f"{name}: {where}{_one_line(exc, url)}", file=sys.stderr)
    except (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError) as exc:
        print(
            f"{name}: cannot reach Redis at {describe_store(url)}: {_one_line(exc, url)}",
            file=sys.stderr,
        )
    except RedisClusterException as exc:  # not a RedisError: raised while finding the nodes
        print(
            f"{name}: Redis Cluster at {describe_store(url)}: {_one_line(exc, url)}",
            file=sys.stderr,
        )
    except RedisError as exc:
        print(f"{name}: Redis error: {type(exc).__name__}: {_one_line(exc, url)}", file=sys.stderr)
    except OSError as exc:
        print(f"{name}: {_one_line(exc, url)}", file=sys.stderr)
    except Exception as exc:
        if os.environ.get(TRACEBACK_VAR, "") not in ("", "0"):
            raise
        print(
            f"{name}: internal error: {type(exc).__name__}: {_one_line(exc, url)} "
            f"(set {TRACEBACK_VAR}=1 for the traceback)",
            file=sys.stderr,
        )
    return 2
