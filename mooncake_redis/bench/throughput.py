"""Batch-128 exists and put (MLA and MHA keys with parents): our library against a naive
baseline with the same Redis traffic but no atomicity, index or eviction, and against the real
Mooncake master when its extra is installed. Also counts Redis commands per call."""

from __future__ import annotations

import time
from typing import Any

from ..models import ReplicateConfig
from .common import (
    CLIENT,
    CommandCounter,
    block_hash,
    check_answers,
    drop_namespace,
    fresh_service,
    keys_of,
    mount,
    stored,
)

BATCH = 128


def _batches(key_format: str, tp: int, n_batches: int, salt: str) -> list[list[tuple[str, str]]]:
    """Batches of (key, parent block hash): chains of blocks, as a request's missing suffix."""
    out: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    i = 0
    while len(out) < n_batches:
        blk, parent = block_hash(i, salt), (block_hash(i - 1, salt) if i % 64 else "")
        for key in keys_of(blk, key_format, tp):
            cur.append((key, parent))
            if len(cur) == BATCH:
                out.append(cur)
                cur = []
        i += 1
    return out


async def _ours(svc: Any, batches: list[list[tuple[str, str]]]) -> dict[str, float]:
    t0 = time.perf_counter()
    for b in batches:
        keys = [k for k, _ in b]
        cfgs = [ReplicateConfig(parent_block_hash=p) for _, p in b]
        started = await svc.batch_put_start(CLIENT, keys, [[4096]] * len(keys), cfgs)
        check_answers("batch_put_start", started, len(keys), stored)
        ended = await svc.batch_put_end(CLIENT, keys)
        check_answers("batch_put_end", ended, len(keys), lambda r: r is None)
    put_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in batches:
        found = await svc.batch_exist_key([k for k, _ in b])
        check_answers("batch_exist_key", found, len(b), lambda r: r is True)
    exist_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in batches:
        absent = await svc.batch_exist_key([k + "-absent" for k, _ in b])
        check_answers("batch_exist_key (absent keys)", absent, len(b), lambda r: r is False)
    absent_s = time.perf_counter() - t0
    n = len(batches) * BATCH
    return {
        "put_keys_per_s": n / put_s,
        "exist_keys_per_s": n / exist_s,
        "exist_absent_keys_per_s": n / absent_s,
    }


async def _naive(svc: Any, batches: list[list[tuple[str, str]]]) -> dict[str, float]:
    """Pipelined HSET per new object and pipelined EXISTS: the floor our design must pay for."""
    client = svc.backend.client
    ns: str = svc.config.namespace

    def key(k: str) -> str:
        return "{" + ns + ":naive}:" + k

    t0 = time.perf_counter()
    for b in batches:
        pipe: Any = client.pipeline(transaction=False)
        for k, p in b:
            pipe.hset(key(k), mapping={"size": 4096, "parent": p, "client": CLIENT, "st": "C"})
        check_answers("naive HSET", await pipe.execute(), len(b), lambda r: isinstance(r, int))
    put_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in batches:
        pipe = client.pipeline(transaction=False)
        for k, _ in b:
            pipe.exists(key(k))
        check_answers("naive EXISTS", await pipe.execute(), len(b), lambda r: r == 1)
    exist_s = time.perf_counter() - t0
    n = len(batches) * BATCH
    return {"put_keys_per_s": n / put_s, "exist_keys_per_s": n / exist_s}


async def _mooncake(batches: list[list[tuple[str, str]]]) -> dict[str, float] | str:
    try:
        from ..replay.mooncake_target import create_mooncake_target
        from ..replay.target import PutItem, TargetOptions
    except ImportError as exc:  # pragma: no cover - optional extra
        return f"not installed: {exc}"
    n = len(batches) * BATCH
    try:
        target = await create_mooncake_target(
            TargetOptions(capacity_blocks=n * 2, objects_per_block=1, value_size=4096)
        )
    except Exception as exc:
        return f"unavailable: {exc}"
    try:
        t0 = time.perf_counter()
        for b in batches:
            done = await target.batch_put([PutItem(k, p, 4096) for k, p in b])
            check_answers("real master batch_put_from", done, len(b), lambda r: r is True)
        put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for b in batches:
            found = await target.batch_exist([k for k, _ in b])
            check_answers("real master batch_is_exist", found, len(b), lambda r: r is True)
        exist_s = time.perf_counter() - t0
    finally:
        await target.close()
    return {"put_keys_per_s": n / put_s, "exist_keys_per_s": n / exist_s}


async def bench_throughput(url: str, n_batches: int = 200, tp: int = 4) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key_format in ("mla", "mha"):
        svc = await fresh_service(url, enable_radix_tree=True, num_shards=64)
        try:
            await mount(svc, n_batches * BATCH * 4096 * 2, segments=4)
            await svc.backend.load_scripts()
            ours = await _ours(svc, _batches(key_format, tp, n_batches, f"o{key_format}"))
            naive = await _naive(svc, _batches(key_format, tp, n_batches, f"n{key_format}"))
            row: dict[str, Any] = {"ours": ours, "naive": naive}
            row["ratio_vs_naive"] = {
                "put": ours["put_keys_per_s"] / naive["put_keys_per_s"],
                "exist": ours["exist_keys_per_s"] / naive["exist_keys_per_s"],
            }
            out[key_format] = row
        finally:
            await drop_namespace(svc)
            await svc.aclose()
    peer = await _mooncake(_batches("mla", tp, n_batches, "mc"))
    out["mooncake_master"] = peer
    if isinstance(peer, dict):
        out["ratio_vs_mooncake_mla"] = {
            "put": out["mla"]["ours"]["put_keys_per_s"] / peer["put_keys_per_s"],
            "exist": out["mla"]["ours"]["exist_keys_per_s"] / peer["exist_keys_per_s"],
        }
    return out


async def bench_round_trips(url: str) -> dict[str, Any]:
    """Redis commands and sequential waves per call on the hot path."""
    svc = await fresh_service(url, enable_radix_tree=True, num_shards=64)
    rows: dict[str, Any] = {}
    try:
        await mount(svc, 1 << 30, segments=3)
        await svc.backend.load_scripts()
        await svc.batch_exist_key(["warm"])  # warm the segment registry cache
        cnt = CommandCounter(svc)
        b1, b0 = block_hash(1, "rt"), block_hash(0, "rt")
        await svc.put_start(CLIENT, b0, [4096])  # a stored parent: the put guard accepts b1
        await svc.put_end(CLIENT, b0)
        cfg = ReplicateConfig(parent_block_hash=b0)
        rows["put_start"] = await cnt.measure(lambda: svc.put_start(CLIENT, b1, [4096], cfg))
        rows["put_end"] = await cnt.measure(lambda: svc.put_end(CLIENT, b1))
        rows["get_replica_list"] = await cnt.measure(lambda: svc.get_replica_list(b1))
        rows["exist_key"] = await cnt.measure(lambda: svc.exist_key(b1))
        keys = [block_hash(i, "rtb") for i in range(BATCH)]
        cfgs = [
            ReplicateConfig(parent_block_hash=block_hash(i - 1, "rtb") if i else "")
            for i in range(BATCH)
        ]
        rows["batch_put_start x128"] = await cnt.measure(
            lambda: svc.batch_put_start(CLIENT, keys, [[4096]] * BATCH, cfgs)
        )
        rows["batch_put_end x128"] = await cnt.measure(lambda: svc.batch_put_end(CLIENT, keys))
        rows["batch_get_replica_list x128"] = await cnt.measure(
            lambda: svc.batch_get_replica_list(keys)
        )
        rows["batch_exist_key x128"] = await cnt.measure(lambda: svc.batch_exist_key(keys))
    finally:
        await drop_namespace(svc)
        await svc.aclose()
    return {k: {"commands": c, "round_trips": w} for k, (c, w) in rows.items()}
