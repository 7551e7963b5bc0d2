"""docker-compose.yml: it parses, and every command, flag and variable it uses exists (no Docker
engine runs here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from mooncake_redis.cli import build_parser
from mooncake_redis.cli.options import known_env_names
from mooncake_redis.config import Config

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def _resolve(value: str) -> str:
    """``${VAR:-default}`` / ``${VAR:?msg}`` as compose would with VAR unset (or set for :?)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "x", value))


def test_redis_is_persistent_and_never_evicts(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    cmd = redis["command"]
    args = dict(zip(cmd[1::2], cmd[2::2]))
    assert cmd[0] == "redis-server"
    assert args["--appendonly"] == "yes" and args["--maxmemory-policy"] == "noeviction"
    assert "healthcheck" in redis and redis["volumes"]


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_three_workers_one_evictor(compose: dict[str, Any]) -> None:
    services = compose["services"]
    workers = [s for s in services.values() if s.get("command", [None, None])[1] == "serve"]
    evictors = [s for s in services.values() if s.get("command", [None, None])[1] == "evictor"]
    assert len(workers) == 3 and len(evictors) == 1
    # The workers share one network namespace (a service of its own publishes their ports),
    # so they share the Mooncake protocol port through SO_REUSEPORT.
    nets = {w["network_mode"] for w in workers}
    assert len(nets) == 1
    owner = services[nets.pop().removeprefix("service:")]
    published = {}
    for port in owner["ports"]:
        assert port.startswith("127.0.0.1:"), "publish on the host's loopback only"
        _, host, inner = port.split(":")
        assert host == inner
        published[inner] = port
    http = {_flag(w["command"], "--port") for w in workers}
    [wire] = {_flag(w["command"], "--mooncake-port") for w in workers}
    assert len(http) == 3 and wire not in http
    assert set(published) == {*http, wire}
    for w in workers:
        assert (
            w["healthcheck"]["test"] and w["depends_on"]["redis"]["condition"] == "service_healthy"
        )
        assert "/health" in " ".join(w["healthcheck"]["test"])
        assert "ports" not in w  # a shared network namespace publishes nothing of its own
    assert evictors[0]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_every_command_parses(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name, svc in compose["services"].items():
        cmd = svc.get("command")
        if name in ("redis", "net") or cmd is None:
            continue
        argv = cmd if isinstance(cmd, list) else shlex.split(cmd)
        assert argv[0] == "mooncake-redis", name
        args = parser.parse_args(argv[1:])  # SystemExit on an unknown subcommand or flag
        assert callable(args.func), name


def test_every_variable_exists_and_parses(compose: dict[str, Any]) -> None:
    known = known_env_names()
    for name, svc in compose["services"].items():
        env = svc.get("environment") or {}
        if name in ("redis", "net"):
            continue
        assert env, name
        values = {k: _resolve(str(v)) for k, v in env.items()}
        for var in values:
            assert var.startswith("MOONCAKE_REDIS_") and var in known, (name, var)
        cfg = Config.from_env(values)  # every Config field value parses
        assert cfg.redis_url.startswith("redis://redis:") and cfg.enable_radix_tree
    # Healthcheck ports agree with the serve port.
    for name, svc in compose["services"].items():
        if svc.get("command", [None, None])[1] == "serve":
            port = svc["command"][svc["command"].index("--port") + 1]
            assert f":{port}/health" in " ".join(svc["healthcheck"]["test"]), name
