"""While Redis is down, a process logs one line when it starts failing and one when Redis is
back, not a traceback per second: ``mooncake-redis evictor`` against a throwaway redis-server
that is stopped for a few seconds and started again on the same port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.servers import RedisProcess, free_port


def _wait_for(path: Path, needle: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in path.read_text():
            return True
        time.sleep(0.1)
    return False


def test_evictor_logs_an_outage_once(tmp_path: Path) -> None:
    server = RedisProcess(free_port(), tmp_path, ["--appendonly", "no"])
    server.start()
    log = tmp_path / "evictor.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mooncake_redis.cli", "evictor", "--redis-url", server.url,
             "--namespace", "outage", "--num-shards", "4"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        assert _wait_for(log, "evictor lease acquired", 30), log.read_text()
        server.stop(kill=True)
        time.sleep(4)  # about four failed ticks at the old one-second pace
        down = log.read_text()
        server.start()
        assert _wait_for(log, "working again", 30), log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        server.stop()
    text = log.read_text()
    assert "Traceback" not in text, text
    failing = [line for line in down.splitlines() if "RPC_FAIL (-900)" in line]
    assert len(failing) == 1, down
    assert "retrying with backoff up to 5 s, quiet until Redis answers" in failing[0]
    again = [line for line in text.splitlines() if "working again after" in line]
    assert len(again) == 1, text
    assert len(text.splitlines()) <= 4, text  # acquired, failing, working again (+ a takeover)


def test_worker_loops_log_an_outage_once(tmp_path: Path) -> None:
    """A worker without the evictor runs the janitor itself, and a background fsck: each logs
    one line when Redis goes away and one when it is back, and no traceback."""
    server = RedisProcess(free_port(), tmp_path, ["--appendonly", "no"])
    server.start()
    log = tmp_path / "worker.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mooncake_redis.cli", "serve", "--redis-url", server.url,
             "--namespace", "outage", "--num-shards", "4", "--host", "127.0.0.1",
             "--port", str(free_port()), "--evictor", "off", "--fsck-interval", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        assert _wait_for(log, "Uvicorn running", 30), log.read_text()
        time.sleep(1.5)
        server.stop(kill=True)
        time.sleep(5)  # several janitor ticks (0.05-1 s) and fsck runs (1 s) at the old pace
        down = log.read_text()
        server.start()
        assert _wait_for(log, "janitor: working again", 30), log.read_text()
        assert _wait_for(log, "background fsck: working again", 30), log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        server.stop()
    text = log.read_text()
    assert "Traceback" not in text, text
    for what in ("janitor", "background fsck"):
        failing = [line for line in down.splitlines() if f"{what}: " in line and "retrying" in line]
        assert len(failing) == 1, down
        again = [line for line in text.splitlines() if f"{what}: working again after" in line]
        assert len(again) == 1, text
