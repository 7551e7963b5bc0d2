"""``mooncake-redis serve``: one stateless master worker (uvicorn, one process)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from ..backend import redact
from .common import log_level, non_negative_float, port
from .options import add_config_args, config_from_args, env

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
        "--mooncake-port",
        type=port,
        default=env("mooncake_port"),
        help="also serve the Mooncake master's own protocol (coro_rpc) on this port, shared "
        "with other workers on the host (SO_REUSEPORT); point MooncakeDistributedStore's master "
        "address here (env MOONCAKE_REDIS_MOONCAKE_PORT; default: off)",
    )
    p.add_argument(
        "--wire-infer-parents",
        action="store_true",
        default=None,
        help="infer radix parents from the calling order of unchanged Mooncake clients "
        "(env MOONCAKE_REDIS_WIRE_INFER_PARENTS; docs/wire.md)",
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

    from ..server.app import ServerSettings, create_app

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log = logging.getLogger("mooncake_redis.server")
    config = config_from_args(args)
    if args.wire_infer_parents:
        config = config.replace(wire_infer_parents=True)
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
    if args.mooncake_port:
        from ..wire.listener import WireListener

        settings.extensions.append(
            WireListener(args.host, args.mooncake_port, args.graceful_timeout)
        )
    log.info(
        "serving %s on http://%s:%d%s (radix %s, evictor %s, %s + %s)",
        redact(config.redis_url),
        args.host,
        args.port,
        f" and coro_rpc :{args.mooncake_port}" if args.mooncake_port else "",
        "on" if config.enable_radix_tree else "off",
        args.evictor,
        loop,
        http,
    )
    server = uvicorn.Server(
        uvicorn.Config(
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
    )
    exit_on_signal = server.handle_exit

    def handle_exit(sig: int, frame: Any) -> None:
        # Extensions that accept connections of their own (the coro_rpc port, shared with
        # other workers) stop accepting at the signal, not after uvicorn's HTTP drain.
        exit_on_signal(sig, frame)
        for ext in settings.extensions:
            if hasattr(ext, "begin_drain"):
                ext.begin_drain()

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else 3  # uvicorn's STARTUP_FAILURE (e.g. a port in use)
