"""Worker processes on loopback: started, awaited until ready, stopped (replay, chaos).

Each worker is ``mooncake-redis serve`` in its own process against one Redis and namespace; the
processes share nothing but Redis, as in a deployment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WorkerFleet:
    """``workers`` worker processes, plus (optionally) a standalone evictor process."""

    def __init__(
        self,
        redis_url: str,
        namespace: str,
        num_shards: int,
        workers: int,
        *,
        radix: bool = True,
        env: Mapping[str, str] | None = None,
        worker_args: Sequence[str] = (),
        mooncake_port: int | None = None,
        log_dir: str | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a fleet needs at least one worker")
        self.redis_url = redis_url
        self.namespace = namespace
        self.num_shards = num_shards
        self.radix = radix
        self.env = {**os.environ, **(env or {})}
        self.worker_args = list(worker_args)
        # All workers share one coro_rpc port (SO_REUSEPORT), as on a host behind one address.
        self.mooncake_port = mooncake_port
        self.ports = [free_port() for _ in range(workers)]
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * workers
        self.evictor: subprocess.Popen[bytes] | None = None
        # Each process's stderr is appended to ``<log_dir>/<name>.log`` (kept across restarts,
        # so a failing run can say what a killed worker logged); without it, discarded.
        self.log_dir = log_dir

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    @property
    def mooncake_address(self) -> str:
        """The master address a Mooncake client is given (``serve --mooncake-port``)."""
        if self.mooncake_port is None:
            raise ValueError("this fleet serves no coro_rpc port")
        return f"127.0.0.1:{self.mooncake_port}"

    def _common(self) -> list[str]:
        args = ["--redis-url", self.redis_url, "--namespace", self.namespace,
                "--num-shards", str(self.num_shards)]  # fmt: skip
        return [*args, "--enable-radix-tree"] if self.radix else args

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        if self.log_dir is None:
            return subprocess.Popen(
                [sys.executable, "-m", "mooncake_redis.cli", *args],
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        with open(os.path.join(self.log_dir, f"{name}.log"), "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "mooncake_redis.cli", *args],
                env=self.env, stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip

    def logs(self) -> dict[str, str]:
        """Each process's log so far, by name (``worker-0``, ``evictor``); {} without a log_dir."""
        if self.log_dir is None:
            return {}
        out = {}
        for f in sorted(os.listdir(self.log_dir)):
            if f.endswith(".log"):
                with open(os.path.join(self.log_dir, f), errors="replace") as fh:
                    out[f[:-4]] = fh.read()
        return out

    def start_worker(self, i: int) -> None:
        wire = ["--mooncake-port", str(self.mooncake_port)] if self.mooncake_port else []
        self.workers[i] = self._spawn(
            f"worker-{i}", "serve", *self._common(), "--port", str(self.ports[i]),
            "--fsck-interval", "0", "--log-level", "warning", *wire, *self.worker_args,
        )  # fmt: skip

    def start_evictor(self, check_interval_ms: int = 10) -> None:
        self.evictor = self._spawn(
            "evictor", "evictor", *self._common(), "--check-interval-ms", str(check_interval_ms)
        )

    async def wait_ready(self, i: int, timeout: float = 90.0) -> None:
        # (a worker took 17-22 s to get ready on a 2-core machine at load 12: the bound is for
        # a worker that hangs, not a measure of its start)
        import httpx

        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as http:
            while True:
                proc = self.workers[i]
                if proc is None or proc.poll() is not None:
                    raise RuntimeError(f"worker {i} exited while starting")
                try:
                    if (await http.get(self.urls[i] + "/ready", timeout=1)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {i} not ready in {timeout}s")
                await asyncio.sleep(0.05)

    async def start_all(self) -> None:
        for i in range(len(self.workers)):
            self.start_worker(i)
        try:
            await asyncio.gather(*(self.wait_ready(i) for i in range(len(self.workers))))
        except BaseException:
            self.stop_all()
            raise

    def stop_all(self) -> None:
        """SIGTERM (graceful: in-flight requests finish, the evictor lease is released)."""
        procs = [p for p in [*self.workers, self.evictor] if p is not None]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
