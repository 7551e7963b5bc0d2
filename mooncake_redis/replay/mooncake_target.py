"""The real peer: a Mooncake master started on loopback, driven through its own Python client.

Needs the optional extra (pip install 'mooncake-redis[mooncake]', which ships `mooncake_master`
and `mooncake.store`) and Debian's libibverbs1. Stored keys are read from the master's admin
HTTP `/get_all_keys`, which grants no lease, so sampling does not disturb eviction order.

Pacing: Mooncake evicts only objects whose lease expired and orders by lease timeout, so the
lease must mean the same stretch of trace time at every replay speed. The CLI scales the default
10 s lease by 1/speedup; replaying as fast as possible with a 10 s lease keeps far more of the
trace leased (unevictable) than real time would.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mooncake_redis.replay.target import PutItem, ReplayTarget, TargetOptions

INSTALL_HINT = (
    "the real Mooncake target needs the optional extra and libibverbs:\n"
    "    pip install 'mooncake-redis[mooncake]'\n"
    "    apt-get install libibverbs1"
)
MIN_SEGMENT_BYTES = 16 * 1024 * 1024  # the client refuses smaller global segments
_PAGE = 4096
_OK = 0


class MooncakeUnavailable(RuntimeError):
    """The Mooncake package, its libraries, or its master cannot be used here."""


def _import_store() -> Any:
    try:
        from mooncake.store import MooncakeDistributedStore
    except ImportError as exc:  # missing package, or libibverbs.so.1 not found
        raise MooncakeUnavailable(f"{INSTALL_HINT}\n(import failed: {exc})") from exc
    return MooncakeDistributedStore


def master_binary() -> Path:
    """The C++ master shipped inside the mooncake package (the console script only execs it)."""
    try:
        import mooncake
    except ImportError as exc:
        raise MooncakeUnavailable(f"{INSTALL_HINT}\n(import failed: {exc})") from exc
    candidate = Path(mooncake.__file__).parent / "mooncake_master"
    if candidate.is_file():
        return candidate
    found = shutil.which("mooncake_master")
    if found:
        return Path(found)
    raise MooncakeUnavailable(f"mooncake_master binary not found\n{INSTALL_HINT}")


def free_port() -> int:
    """A currently free TCP port on loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _http_get(url: str, timeout: float = 30.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body: bytes = resp.read()
        return body.decode()


def segment_value_size(options: TargetOptions) -> int:
    """Object size so capacity_blocks fit and the segment meets the client's 16 MiB minimum."""
    objects = max(1, options.capacity_blocks * options.objects_per_block)
    size = max(options.value_size, -(-MIN_SEGMENT_BYTES // objects))
    return -(-size // _PAGE) * _PAGE


class MooncakeMaster:
    """A `mooncake_master` subprocess on free loopback ports, killed on stop() or at exit."""

    def __init__(self, options: TargetOptions, workdir: Path) -> None:
        self.rpc_port = free_port()
        self.http_port = free_port()
        self.admin_port = free_port()
        self.log_path = workdir / "mooncake_master.log"
        args = [
            str(master_binary()),
            f"--rpc_port={self.rpc_port}",
            "--rpc_address=127.0.0.1",
            "--enable_http_metadata_server=true",
            "--http_metadata_server_host=127.0.0.1",
            f"--http_metadata_server_port={self.http_port}",
            "--metrics_host=127.0.0.1",
            f"--metrics_port={self.admin_port}",
            f"--default_kv_lease_ttl={options.lease_ttl_ms}",
            f"--eviction_high_watermark_ratio={options.eviction_high_watermark_ratio}",
            f"--eviction_ratio={options.eviction_ratio}",
        ]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        atexit.register(self.stop)  # never leave a master behind, even on a crash

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def rpc_address(self) -> str:
        return f"127.0.0.1:{self.rpc_port}"

    @property
    def metadata_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/metadata"

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Block until the admin server answers; fail with the master's log if it died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise MooncakeUnavailable(
                    f"mooncake_master exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError):
                _http_get(self.admin_url + "/health", timeout=1.0)
                return
            time.sleep(0.1)
        self.stop()
        raise MooncakeUnavailable(f"mooncake_master not ready after {timeout}s:\n{self.log_tail()}")

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()


class MasterEndpoint(Protocol):
    """What the client needs of a master: its coro_rpc address, its transfer-engine metadata
    URL, and an admin URL serving /get_all_keys and /metrics (for samples, no leases)."""

    @property
    def rpc_address(self) -> str: ...

    @property
    def metadata_url(self) -> str: ...

    @property
    def admin_url(self) -> str: ...

    def stop(self) -> None: ...


@dataclass
class ExternalMaster:
    """A master someone else runs (``replay --master-address``): a real mooncake_master, or
    our workers' coro_rpc port; never stopped by us."""

    rpc_address: str
    metadata_url: str
    admin_url: str

    @classmethod
    def from_options(cls, options: TargetOptions) -> ExternalMaster:
        addr = options.extra["master_address"]
        host = addr.rsplit(":", 1)[0]
        return cls(
            addr,
            options.extra.get("metadata_url") or f"http://{host}:8080/metadata",
            options.extra.get("admin_url") or f"http://{host}:9003",
        )

    def stop(self) -> None:
        pass


class _NativeStderr:
    """Send fd 2 to a file: the C++ client logs every failed read there, which would bury the
    progress bar. Python-level errors still surface after close() restores it."""

    def __init__(self, path: Path) -> None:
        self._saved: int | None = None
        if os.environ.get("MOONCAKE_REDIS_REPLAY_VERBOSE"):
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._saved = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)

    def restore(self) -> None:
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None


class MooncakeTarget:
    """ReplayTarget: the real client against a master (by default a real master started on
    loopback; or any ``MasterEndpoint``); blocking client calls run in a worker thread."""

    name = "mooncake"

    def __init__(
        self,
        options: TargetOptions,
        batch_capacity: int = 128,
        master: Callable[[Path], MasterEndpoint] | None = None,
        name: str = "mooncake",
    ) -> None:
        store_cls = _import_store()
        self.options = options
        self.name = name
        self.value_size = segment_value_size(options)
        self._tmp = tempfile.TemporaryDirectory(prefix="mooncake-replay-")
        workdir = Path(self._tmp.name)
        self.master: MasterEndpoint | None = None
        self._stderr: _NativeStderr | None = None
        self._store: Any = None
        try:
            side: MasterEndpoint
            if master is not None:
                side = self.master = master(workdir)
            elif "master_address" in options.extra:
                side = self.master = ExternalMaster.from_options(options)
            else:
                started = MooncakeMaster(options, workdir)
                side = self.master = started
                started.wait_ready()
            # Keep the transfer engine on loopback where it honours the setting.
            os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
            os.environ.setdefault("MC_LOG_LEVEL", "ERROR")
            self._stderr = _NativeStderr(workdir / "client.log")
            self._store = store_cls()
            segment = options.capacity_blocks * options.objects_per_block * self.value_size
            self._slots = batch_capacity
            self._buf = ctypes.create_string_buffer(self._slots * self.value_size)
            self._ptr = ctypes.addressof(self._buf)
            rc = self._store.setup(
                "127.0.0.1",
                side.metadata_url,
                segment,
                max(MIN_SEGMENT_BYTES, 2 * self._slots * self.value_size),
                "tcp",
                "",
                side.rpc_address,
            )
            if rc != _OK:
                raise MooncakeUnavailable(f"mooncake client setup failed ({rc})")
            rc = self._store.register_buffer(self._ptr, self._slots * self.value_size)
            if rc != _OK:
                raise MooncakeUnavailable(f"mooncake register_buffer failed ({rc})")
        except BaseException:
            self._shutdown()
            raise

    def _split(self, keys: list[str]) -> list[list[str]]:
        return [keys[i : i + self._slots] for i in range(0, len(keys), self._slots)]

    def _ptrs(self, n: int) -> tuple[list[int], list[int]]:
        return [self._ptr + i * self.value_size for i in range(n)], [self.value_size] * n

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        codes: list[int] = await asyncio.to_thread(self._store.batch_is_exist, keys)
        return [c == 1 for c in codes]

    def _put(self, keys: list[str]) -> list[bool]:
        out: list[bool] = []
        for part in self._split(keys):
            codes: list[int] = self._store.batch_put_from(part, *self._ptrs(len(part)))
            out.extend(c == _OK for c in codes)
        return out

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        # Mooncake 0.3.13 has no parent_block_hash (the radix RFC is unimplemented upstream).
        return await asyncio.to_thread(self._put, [it.key for it in items])

    def _get(self, keys: list[str]) -> list[bool]:
        out: list[bool] = []
        for part in self._split(keys):
            sizes: list[int] = self._store.batch_get_into(part, *self._ptrs(len(part)))
            out.extend(s > 0 for s in sizes)
        return out

    async def batch_get(self, keys: list[str]) -> list[bool]:
        return await asyncio.to_thread(self._get, keys)

    def _admin(self) -> str:
        assert self.master is not None
        return self.master.admin_url

    async def stored_keys(self) -> set[str]:
        body = await asyncio.to_thread(_http_get, self._admin() + "/get_all_keys")
        return {line for line in body.splitlines() if line}

    async def counters(self) -> dict[str, int]:
        """From the master's admin /metrics (a master side may read its own instead)."""
        own = getattr(self.master, "counters", None)
        if own is not None:  # a master side that reads its own (our workers: from Redis)
            got: dict[str, int] = await own()
            return got
        wanted = {
            "master_successful_evictions": "evictions",
            "master_evicted_key_count": "evicted_keys",
            "master_evicted_size_bytes": "bytes_evicted",
        }
        out = {"evictions": 0, "evicted_keys": 0, "bytes_evicted": 0, "removed": 0}
        body = await asyncio.to_thread(_http_get, self._admin() + "/metrics")
        for line in body.splitlines():
            name, _, value = line.partition(" ")
            field = wanted.get(name.removesuffix("_total"))
            if field:
                out[field] = int(float(value))
        return out

    def _shutdown(self) -> None:
        try:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.close()
                self._store = None
        finally:
            if self._stderr is not None:
                self._stderr.restore()
                self._stderr = None
            if self.master is not None:
                self.master.stop()
            self._tmp.cleanup()

    async def close(self) -> None:
        await asyncio.to_thread(self._shutdown)


async def create_mooncake_target(options: TargetOptions) -> ReplayTarget:
    """Registry factory: start a master and connect a client (blocking, so in a thread)."""
    return await asyncio.to_thread(MooncakeTarget, options)
