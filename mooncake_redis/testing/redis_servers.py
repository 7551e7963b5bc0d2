"""Throwaway redis-server processes on loopback ports: for the reliability tests and for the
chaos run's outage and OOM phases (which must never touch a shared Redis).

Every failure to start raises with the server's log, so a missing server is a loud failure.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_block(n: int, start: int = 17000) -> int:
    """A run of n free ports (cluster bus ports at +10000 must be free too)."""
    for base in range(start, max(30000, start + 100 - n), n + 3):
        ok = True
        for p in (*range(base, base + n), *range(base + 10000, base + 10000 + n)):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block for a Redis Cluster")


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if not path:
        raise RuntimeError("redis-server not found on PATH: install Debian's redis-server package")
    return path


@dataclass
class RedisProcess:
    port: int
    workdir: Path
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        log = self.workdir / f"redis-{self.port}.log"
        cmd = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--logfile",
            str(log),
            "--save",
            "",
            *self.args,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"redis-server on {self.port} exited: {err}{_tail(log)}")
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not answer in {timeout}s{_tail(log)}")

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def _tail(path: Path) -> str:
    try:
        return "\n--- log ---\n" + "\n".join(path.read_text().splitlines()[-20:])
    except OSError:
        return ""


OOM_MARGIN = 256 * 1024


def oom_limit(used_memory: int) -> int:
    """A ``maxmemory`` that keeps Redis refusing writes: ``OOM_MARGIN`` under what it uses. At
    exactly that (or one refused write past it) a few KiB freed by anything, a query buffer
    clientsCron shrank on a loaded machine, let the next write through (CI, stop 23)."""
    return max(used_memory - OOM_MARGIN, 1 << 20)
