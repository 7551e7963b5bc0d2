"""Drives the real, unchanged Mooncake client (``MooncakeDistributedStore``) in its own process
and prints JSON, for tests that compare masters or kill workers under it.

    python tests/mooncake_driver.py script RPC_ADDR METADATA_URL < steps.json
        runs [op, args...] steps, prints {"results": [[op, result], ...]}
    python tests/mooncake_driver.py churn RPC_ADDR METADATA_URL SECONDS
        puts and reads back unique keys until told to stop (a line on stdin or SECONDS),
        then re-reads every acknowledged put; prints counts and the keys lost or corrupted

Values are derived from (key, seed) so both sides agree without shipping data; reads report
md5s. The caller sets MC_* port variables (the client binds ports of its own).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import select
import sys
import time
from typing import Any

SEGMENT = 64 << 20
BUFFER = 16 << 20


def value(key: str, size: int, seed: int = 0) -> bytes:
    block = hashlib.sha256(f"{key}/{seed}".encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def connect(rpc: str, metadata: str) -> Any:
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", metadata, SEGMENT, BUFFER, "tcp", "", rpc)
    if rc != 0:
        raise SystemExit(f"setup failed: {rc}")
    return store


class Steps:
    """One method per op; each returns something JSON can carry and both masters can match."""

    def __init__(self, store: Any) -> None:
        self.s = store
        self.buf = ctypes.create_string_buffer(BUFFER)
        self.base = ctypes.addressof(self.buf)
        self.registered = False

    def put(self, key: str, size: int, seed: int = 0) -> Any:
        return self.s.put(key, value(key, size, seed))

    def upsert(self, key: str, size: int, seed: int = 0) -> Any:
        return self.s.upsert(key, value(key, size, seed))

    def get(self, key: str) -> Any:
        data = self.s.get(key)
        return [len(data), md5(data)] if data else 0

    def get_size(self, key: str) -> Any:
        return self.s.get_size(key)

    def is_exist(self, key: str) -> Any:
        return self.s.is_exist(key)

    def batch_is_exist(self, keys: list[str]) -> Any:
        return list(self.s.batch_is_exist(keys))

    def remove(self, key: str, force: bool = False) -> Any:
        return self.s.remove(key, force)

    def batch_remove(self, keys: list[str], force: bool = False) -> Any:
        return list(self.s.batch_remove(keys, force))

    def remove_all(self, force: bool = False) -> Any:
        return self.s.remove_all(force)

    def put_batch(self, keys: list[str], size: int, seed: int = 0) -> Any:
        return self.s.put_batch(keys, [value(k, size, seed) for k in keys])

    def get_batch(self, keys: list[str]) -> Any:
        return [md5(v) if v else 0 for v in self.s.get_batch(keys)]

    def _register(self) -> None:
        if not self.registered:
            assert self.s.register_buffer(self.base, BUFFER) == 0
            self.registered = True

    def batch_put_from(self, keys: list[str], size: int, seed: int = 0) -> Any:
        self._register()
        for i, k in enumerate(keys):
            ctypes.memmove(self.base + i * size, value(k, size, seed), size)
        ptrs = [self.base + i * size for i in range(len(keys))]
        return list(self.s.batch_put_from(keys, ptrs, [size] * len(keys)))

    def batch_get_into(self, keys: list[str], size: int) -> Any:
        self._register()
        ctypes.memset(self.base, 0, len(keys) * size)
        ptrs = [self.base + i * size for i in range(len(keys))]
        got = list(self.s.batch_get_into(keys, ptrs, [size] * len(keys)))
        data = [md5(ctypes.string_at(self.base + i * size, size)) for i in range(len(keys))]
        return [[n, d if n > 0 else 0] for n, d in zip(got, data)]

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def run_script(store: Any, steps: list[list[Any]]) -> None:
    runner = Steps(store)
    results = []
    for op, *args in steps:
        results.append([op, getattr(runner, op)(*args)])
    print(json.dumps({"results": results}), flush=True)


def churn(store: Any, seconds: float) -> None:
    """Unique keys of 1-16 KiB: put, then read back a recent one; never stops for a failure."""
    acked: dict[str, str] = {}
    counts = {"puts_ok": 0, "puts_failed": 0, "gets_ok": 0, "gets_failed": 0, "gets_bad": 0}
    deadline = time.monotonic() + seconds
    i = 0
    print(json.dumps({"started": True}), flush=True)
    while time.monotonic() < deadline:
        if select.select([sys.stdin], [], [], 0)[0]:
            break
        key = f"churn-{i}"
        data = value(key, 1024 * (1 + i % 16))
        if store.put(key, data) == 0:
            acked[key] = md5(data)
            counts["puts_ok"] += 1
        else:
            counts["puts_failed"] += 1
        if i % 2 and acked:
            k = f"churn-{max(0, i - 5)}"
            if k in acked:
                got = store.get(k)
                if not got:
                    counts["gets_failed"] += 1
                elif md5(got) != acked[k]:
                    counts["gets_bad"] += 1
                else:
                    counts["gets_ok"] += 1
        i += 1
    lost, corrupted = [], []
    for k, digest in acked.items():
        for _ in range(3):  # a read cut by a dying worker is retried, as a caller would
            got = store.get(k)
            if got:
                break
            time.sleep(0.2)
        if not got:
            lost.append(k)
        elif md5(got) != digest:
            corrupted.append(k)
    print(json.dumps({**counts, "acked": len(acked), "lost": lost, "corrupted": corrupted}))


def main() -> None:
    mode, rpc, metadata = sys.argv[1:4]
    store = connect(rpc, metadata)
    try:
        if mode == "script":
            run_script(store, json.load(sys.stdin))
        else:
            churn(store, float(sys.argv[4]))
    finally:
        store.close()


if __name__ == "__main__":
    main()
