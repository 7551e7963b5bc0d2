"""A throwaway redis-server under valgrind's callgrind, for the measuring tools (not a test).

``tests/lua_op_cost.py`` and ``tests/alloc_callgrind.py`` count the server's instructions per
script call: start the server with instrumentation off, ``ctl("-z")`` before a call and
``ctl("-d", name)`` after it, then :meth:`GrindServer.counts` reads each dump's total, in order.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import redis


class GrindServer:
    def __init__(self, port: int, *server_args: str) -> None:
        self.port = port
        self.workdir = tempfile.mkdtemp()
        server = shutil.which("redis-server") or "redis-server"
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={self.workdir}/cg.%p", server, "--port", str(port),
             "--bind", "127.0.0.1", "--save", "", "--dir", self.workdir, *server_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def ready(self) -> redis.Redis:
        """A client once the server answers (valgrind starts it about 50 times slower)."""
        r = redis.Redis(port=self.port)
        for _ in range(1200):
            try:
                r.ping()
                return r
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server under callgrind on port {self.port} did not start")

    def ctl(self, *args: str) -> None:
        """``callgrind_control`` (``-i on``, ``-z``, ``-d <plain name>``) on the server."""
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def counts(self) -> list[int]:
        """The instructions of every dump so far, in dump order."""
        files = sorted(glob.glob(f"{self.workdir}/cg.{self.proc.pid}.*"),
                       key=lambda f: int(f.split(".")[-1]))  # fmt: skip
        out = []
        for f in files:
            with open(f) as fh:
                text = fh.read()
            # A dump whose instrumentation was switched off at its end says summary 0 and has
            # the count in its totals line.
            m = re.search(r"^totals: (\d+)", text, re.M)
            m = m or re.search(r"^summary: (\d+)", text, re.M)
            out.append(int(m[1]) if m else 0)
        return out

    def stop(self) -> None:
        """Ends the server; with ``GRIND_KEEP=<dir>`` its dumps are copied there first (for
        ``callgrind_annotate``)."""
        keep = os.environ.get("GRIND_KEEP")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for f in glob.glob(f"{self.workdir}/cg.*"):
                shutil.copy(f, keep)
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)
