"""One real Mooncake client measuring a master (run by ``bench --sections wire`` in its own
process, since the client binds ports and threads of its own):

    python -m mooncake_redis.bench.wire_client RPC_ADDRESS METADATA_URL [--seconds S]

Prints one JSON object of rates. Every call is checked before it counts: puts return 0, exists
find every key stored, reads return the bytes written.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import time
import uuid
from collections.abc import Callable

BATCH = 128
VALUE = 4096
MAX_BATCHES = 96  # 12,288 objects, 48 MiB, twice (two key formats): the segment never fills


def _timed(seconds: float, limit: int, step: Callable[[int], None]) -> tuple[int, float]:
    """Runs ``step(i)`` until ``seconds`` pass or ``limit`` steps ran; (steps, elapsed)."""
    t0 = time.perf_counter()
    n = 0
    while n < limit and (n == 0 or time.perf_counter() - t0 < seconds):
        step(n)
        n += 1
    return n, time.perf_counter() - t0


def need(ok: bool, what: object = "") -> None:
    """A check that stays under ``python -O`` (the calls it wraps must always run)."""
    if not ok:
        raise SystemExit(f"wire bench: a call failed or found nothing: {what!r}")


def run(rpc: str, metadata: str, seconds: float) -> dict[str, float]:
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", metadata, 128 << 20, 32 << 20, "tcp", "", rpc)
    if rc != 0:
        raise SystemExit(f"setup failed: {rc}")
    try:
        prefix = uuid.uuid4().hex[:8]
        buf = ctypes.create_string_buffer(BATCH * VALUE)
        base = ctypes.addressof(buf)
        need(store.register_buffer(base, BATCH * VALUE) == 0)
        for i in range(BATCH):
            ctypes.memset(base + i * VALUE, i + 1, VALUE)
        ptrs = [base + i * VALUE for i in range(BATCH)]
        sizes = [VALUE] * BATCH

        def stored_batches(key: Callable[[int, int], str]) -> tuple[list[list[str]], float, float]:
            """batch_put_from then batch_is_exist of batches of key(n, i); the batches and the
            two rates (keys/s)."""
            batches: list[list[str]] = []

            def put_batch(n: int) -> None:
                keys = [key(n, i) for i in range(BATCH)]
                codes = store.batch_put_from(keys, ptrs, sizes)
                need(list(codes) == [0] * BATCH, codes)
                batches.append(keys)

            n_put, t_put = _timed(seconds, MAX_BATCHES, put_batch)

            def exists(n: int) -> None:
                found = store.batch_is_exist(batches[n % len(batches)])
                need(list(found) == [1] * BATCH, found)

            n_ex, t_ex = _timed(seconds, 1 << 30, exists)
            return batches, n_put * BATCH / t_put, n_ex * BATCH / t_ex

        batches, put_rate, exist_rate = stored_batches(lambda n, i: f"{prefix}-b{n}-{i}")

        def absent(n: int) -> None:
            keys = [f"{prefix}-absent-{n}-{i}" for i in range(BATCH)]
            need(list(store.batch_is_exist(keys)) == [0] * BATCH)

        n_ab, t_ab = _timed(seconds, 1 << 30, absent)
        # The same two batch calls with the keys an engine sends for an MLA model: 64-hex
        # block hashes (SGLang HiCache), which our layout keeps in the block's own hash (the
        # keys above are arbitrary strings: an object hash and a radix node each).
        blocks, block_put_rate, block_exist_rate = stored_batches(
            lambda n, i: hashlib.sha256(f"{prefix}-h{n}-{i}".encode()).hexdigest()
        )
        value = bytes(range(256)) * (VALUE // 256)
        singles: list[str] = []

        def put_one(n: int) -> None:
            key = f"{prefix}-s{n}"
            need(store.put(key, value) == 0)
            singles.append(key)

        n_p, t_p = _timed(seconds, 4000, put_one)

        def exist_one(n: int) -> None:
            need(store.is_exist(singles[n % len(singles)]) == 1)

        n_e, t_e = _timed(seconds, 1 << 30, exist_one)

        def get_one(n: int) -> None:
            need(store.get(singles[n % len(singles)]) == value)

        n_g, t_g = _timed(seconds, 1 << 30, get_one)
        # The batch-written data reads back too (one batch, zero-copy).
        dst = ctypes.create_string_buffer(BATCH * VALUE)
        dbase = ctypes.addressof(dst)
        need(store.register_buffer(dbase, BATCH * VALUE) == 0)
        got = store.batch_get_into(batches[-1], [dbase + i * VALUE for i in range(BATCH)], sizes)
        need(list(got) == sizes)
        need(all(dst.raw[i * VALUE : (i + 1) * VALUE] == bytes([i + 1]) * VALUE
                   for i in range(BATCH)))  # fmt: skip
        return {
            "batch_put_from_128x4KiB_keys_per_s": put_rate,
            "batch_is_exist_128_keys_per_s": exist_rate,
            "batch_is_exist_128_absent_keys_per_s": n_ab * BATCH / t_ab,
            "batch_put_from_128x4KiB_block_keys_per_s": block_put_rate,
            "batch_is_exist_128_block_keys_per_s": block_exist_rate,
            "put_4KiB_per_s": n_p / t_p,
            "is_exist_per_s": n_e / t_e,
            "get_4KiB_per_s": n_g / t_g,
            "objects_written": float((len(batches) + len(blocks)) * BATCH + n_p),
        }
    finally:
        store.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("rpc")
    p.add_argument("metadata")
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args()
    print(json.dumps(run(a.rpc, a.metadata, a.seconds)), flush=True)


if __name__ == "__main__":
    main()
