"""Start and stop throwaway Redis servers on loopback ports (a Redis Cluster, an AOF server).

Used by the test fixtures and the reliability tools. Every failure to start raises with the
server's log, so a missing server is a loud failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from mooncake_redis.testing.redis_servers import (
    RedisProcess,
    free_port,
    free_port_block,
    oom_limit,
    redis_server_binary,
)

__all__ = ["RedisCluster", "RedisProcess", "free_port", "free_port_block", "redis_server_binary"]


@dataclass
class RedisCluster:
    masters: int = 3
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mcr-cluster-")))
    nodes: list[RedisProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        # MOONCAKE_REDIS_TEST_PORT_BASE: where to look for free ports (a shared machine's range).
        base = free_port_block(
            self.masters, int(os.environ.get("MOONCAKE_REDIS_TEST_PORT_BASE", "17000"))
        )
        for port in range(base, base + self.masters):
            node = RedisProcess(
                port,
                self.workdir,
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    f"nodes-{port}.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--appendonly",
                    "no",
                ],
            )
            node.start()
            self.nodes.append(node)
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        cli = shutil.which("redis-cli")
        if not cli:
            raise RuntimeError("redis-cli not found on PATH")
        res = subprocess.run(
            [cli, "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if res.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {res.stdout}{res.stderr}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [
                _cluster_state(redis.Redis(port=n.port, decode_responses=True)) for n in self.nodes
            ]
            if all(s == "ok" for s in states):
                return
            time.sleep(0.2)
        raise RuntimeError("Redis Cluster did not reach cluster_state:ok in 30 s")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(kill=True)
        self.nodes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _cluster_state(client: redis.Redis) -> str:
    info = client.execute_command("CLUSTER INFO")
    if isinstance(info, dict):
        return str(info.get("cluster_state"))
    for line in str(info).splitlines():
        if line.startswith("cluster_state:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def ensure_standalone(url: str = "redis://127.0.0.1:6379") -> str:
    """The machine's Redis (CI starts it in .ci/run); fail loudly when it does not answer."""
    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.RedisError as exc:
        raise RuntimeError(
            f"no Redis at {url}: start one (see .ci/run) or set MOONCAKE_REDIS_TEST_URL"
        ) from exc
    return url


def standalone_url() -> str:
    return os.environ.get("MOONCAKE_REDIS_TEST_URL", "redis://127.0.0.1:6379")


async def saturate(admin: Any, start: int = 0) -> list[str]:
    """Writes 1 KiB keys until Redis refuses one (OOM), then lowers maxmemory under what is
    used (``oom_limit``: the first refusal alone leaves Redis one key over, and a few KiB freed
    let writes through again); returns the keys' names. The caller keeps ``admin`` open:
    closing it frees its buffers too."""
    made: list[str] = []
    for j in range(start, start + 200_000):
        try:
            await admin.set(f"filler:{j}", b"x" * 1024)
        except redis.exceptions.OutOfMemoryError:
            used = int((await admin.info("memory"))["used_memory"])
            await admin.config_set("maxmemory", oom_limit(used))
            return made
        made.append(f"filler:{j}")
    raise AssertionError("Redis never refused a write")
