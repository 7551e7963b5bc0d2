"""``mooncake-redis serve``: one stateless master worker (uvicorn, one process)."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from ..backend import redact
from ..cli_common import log_level, non_negative_float, port
from .cliopts import add_config_args, config_from_args, env

if TYPE_CHECKING:
    from ..config import Config

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def event_loop_and_parser() -> tuple[str, str]:
    """uvloop and httptools (from ``uvicorn[standard]``; uvloop has no Windows build), else
    asyncio and h11: several times the CPU per request."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return loop, http


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run a master worker (HTTP API, /metrics)",
        description="Run one stateless master worker. Start several against one Redis.",
    )
    add_config_args(p)
    p.add_argument(
        "--host",
        default=env("host", "127.0.0.1"),
        help="bind address (env MOONCAKE_REDIS_HOST; loopback unless told otherwise)",
    )
    p.add_argument(
        "--port", type=port, default=env("port", "50051"), help="TCP port (env MOONCAKE_REDIS_PORT)"
    )
    p.add_argument(
        "--token",
        default=env("token"),
        help="bearer token every endpoint but /health requires (env MOONCAKE_REDIS_TOKEN)",
    )
    p.add_argument(
        "--evictor",
        choices=("auto", "off"),
        default=env("evictor", "auto"),
        help="auto: take part in the evictor lease in this worker (env MOONCAKE_REDIS_EVICTOR)",
    )
    p.add_argument(
        "--fsck-interval",
        type=non_negative_float,
        default=env("fsck_interval", "300"),
        help="seconds between cached background fsck runs for /metrics; 0 = off "
        "(env MOONCAKE_REDIS_FSCK_INTERVAL)",
    )
    p.add_argument(
        "--graceful-timeout",
        type=non_negative_float,
        default=env("graceful_timeout", "30"),
        help="seconds to finish in-flight requests on SIGTERM "
        "(env MOONCAKE_REDIS_GRACEFUL_TIMEOUT)",
    )
    p.add_argument(
        "--log-level",
        type=log_level,
        default=env("log_level", "info"),
        help="debug, info, warning, error (env MOONCAKE_REDIS_LOG_LEVEL)",
    )
    p.set_defaults(func=run_serve)


def _check_bind(host: str, port: int) -> None:
    """Fails with one line when the address cannot be bound (in use, not ours)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc}") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError as exc:
            raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


async def _preflight(config: Config) -> None:
    if config.redis_url.startswith("fakeredis://"):
        return  # the embedded store lives in the worker's own process
    from ..service import MasterService

    service = await MasterService.from_url(config.redis_url, config)
    await service.aclose()


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import ServerSettings, create_app

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log = logging.getLogger("mooncake_redis.server")
    config = config_from_args(args)
    _check_bind(args.host, args.port)
    # Reach Redis (and check the namespace's recorded shard count) before uvicorn starts: a
    # failure is then one line from the CLI's guard, not a traceback from the app's startup.
    asyncio.run(_preflight(config))
    if args.host not in LOOPBACK and not args.token:
        log.warning("binding %s without --token: anyone who reaches it can use the API", args.host)
    settings = ServerSettings(
        config=config,
        token=args.token or None,
        evictor=args.evictor,
        fsck_interval_s=args.fsck_interval,
    )
    loop, http = event_loop_and_parser()
    log.info(
        "serving %s on http://%s:%d (radix %s, evictor %s, %s + %s)",
        redact(config.redis_url),
        args.host,
        args.port,
        "on" if config.enable_radix_tree else "off",
        args.evictor,
        loop,
        http,
    )
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=args.log_level.lower(),
        access_log=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=args.graceful_timeout,
        lifespan="on",
        loop=loop,
        http=http,
    )
    return 0
