"""Batch-128 exists and put (MLA and MHA keys with parents): our library against a naive
baseline with the same Redis traffic but no atomicity, index or eviction, and against the real
Mooncake master when its extra is installed, in interleaved rounds (each ratio compares runs
a fraction of a second apart). Also counts Redis commands per call."""

from __future__ import annotations

import statistics
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


Batches = list[list[tuple[str, str]]]


class _Ours:
    """Our library: batch_put_start + batch_put_end, batch_exist_key (present and absent)."""

    def __init__(self, svc: Any) -> None:
        self.svc = svc

    async def put(self, batches: Batches) -> None:
        for b in batches:
            keys = [k for k, _ in b]
            cfgs = [ReplicateConfig(parent_block_hash=p) for _, p in b]
            started = await self.svc.batch_put_start(CLIENT, keys, [[4096]] * len(keys), cfgs)
            check_answers("batch_put_start", started, len(keys), stored)
            ended = await self.svc.batch_put_end(CLIENT, keys)
            check_answers("batch_put_end", ended, len(keys), lambda r: r is None)

    async def exist(self, batches: Batches) -> None:
        for b in batches:
            found = await self.svc.batch_exist_key([k for k, _ in b])
            check_answers("batch_exist_key", found, len(b), lambda r: r is True)

    async def absent(self, batches: Batches) -> None:
        for b in batches:
            absent = await self.svc.batch_exist_key([k + "-absent" for k, _ in b])
            check_answers("batch_exist_key (absent keys)", absent, len(b), lambda r: r is False)


class _Naive:
    """Pipelined HSET per new object and pipelined EXISTS: the floor our design must pay for."""

    def __init__(self, svc: Any) -> None:
        self.client = svc.backend.client
        self.tag = "{" + svc.config.namespace + ":naive}:"

    async def put(self, batches: Batches) -> None:
        for b in batches:
            pipe: Any = self.client.pipeline(transaction=False)
            for k, p in b:
                fields = {"size": 4096, "parent": p, "client": CLIENT, "st": "C"}
                pipe.hset(self.tag + k, mapping=fields)
            check_answers("naive HSET", await pipe.execute(), len(b), lambda r: isinstance(r, int))

    async def exist(self, batches: Batches) -> None:
        for b in batches:
            pipe: Any = self.client.pipeline(transaction=False)
            for k, _ in b:
                pipe.exists(self.tag + k)
            check_answers("naive EXISTS", await pipe.execute(), len(b), lambda r: r == 1)


class _Master:
    """The real Mooncake master through its own client (batch_put_from, batch_is_exist)."""

    def __init__(self, target: Any, put_item: Any) -> None:
        self.target, self.put_item = target, put_item

    async def put(self, batches: Batches) -> None:
        for b in batches:
            done = await self.target.batch_put([self.put_item(k, p, 4096) for k, p in b])
            check_answers("real master batch_put_from", done, len(b), lambda r: r is True)

    async def exist(self, batches: Batches) -> None:
        for b in batches:
            found = await self.target.batch_exist([k for k, _ in b])
            check_answers("real master batch_is_exist", found, len(b), lambda r: r is True)


async def _master(n_keys: int) -> _Master | str:
    try:
        from ..replay.mooncake_target import create_mooncake_target
        from ..replay.target import PutItem, TargetOptions
    except ImportError as exc:  # pragma: no cover - optional extra
        return f"not installed: {exc}"
    try:
        target = await create_mooncake_target(
            TargetOptions(capacity_blocks=n_keys * 2, objects_per_block=1, value_size=4096)
        )
    except Exception as exc:
        return f"unavailable: {exc}"
    return _Master(target, PutItem)


async def _rounds(
    runners: dict[str, Any], batches: dict[str, Batches], rounds: int
) -> dict[str, dict[str, list[float]]]:
    """Seconds per round of each runner's put, then exist (and ours' absent), the runners taking
    turns within a round (the order rotating), so that every ratio compares runs a fraction of a
    second apart: a shared machine's load moves between rounds far more than within one."""
    names = list(runners)
    chunk = len(next(iter(batches.values()))) // rounds
    secs: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    for op in ("put", "exist", "absent"):
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                fn = getattr(runners[name], op, None)
                if fn is None:
                    continue
                t0 = time.perf_counter()
                await fn(batches[name][r * chunk : (r + 1) * chunk])
                secs[name].setdefault(op, []).append(time.perf_counter() - t0)
    return secs


def _ratio(ours: list[float], base: list[float]) -> dict[str, float]:
    """Our keys/s over the baseline's: per round (its seconds over ours), and over all rounds."""
    per = sorted(b / o for o, b in zip(ours, base))
    return {
        "median": statistics.median(per),
        "min": per[0],
        "max": per[-1],
        "overall": sum(base) / sum(ours),
    }


def _ratios(
    secs: dict[str, dict[str, list[float]]], base: str
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Ours against base for put and exist: the medians, and each ratio's spread (_ratio)."""
    spread = {op: _ratio(secs["ours"][op], secs[base][op]) for op in ("put", "exist")}
    return {op: r["median"] for op, r in spread.items()}, spread


RATE_NAMES = {
    "put": "put_keys_per_s",
    "exist": "exist_keys_per_s",
    "absent": "exist_absent_keys_per_s",
}


async def bench_throughput(
    url: str, n_batches: int = 200, tp: int = 4, rounds: int = 10, num_shards: int = 0
) -> dict[str, Any]:
    """Figures per key format: keys/s of each runner over all rounds, and ours against the naive
    baseline (MLA also against the real master): ``ratio_vs_*`` the median of the per-round
    ratios, ``ratio_vs_*_rounds`` their spread and the ratio over all rounds. ``num_shards`` 0:
    the store's default for this Redis (``num_shards`` in the figures: the count it chose)."""
    out: dict[str, Any] = {"rounds": rounds}
    n = n_batches * BATCH
    master = await _master(n)
    out["mooncake_master"] = master  # a dict of rates below, or why it is unavailable
    try:
        for key_format in ("mla", "mha"):
            svc = await fresh_service(url, enable_radix_tree=True, num_shards=num_shards)
            out["num_shards"] = svc.config.num_shards
            try:
                await mount(svc, n * 4096 * 2, segments=4)
                await svc.backend.load_scripts()
                runners: dict[str, Any] = {"ours": _Ours(svc), "naive": _Naive(svc)}
                if key_format == "mla" and isinstance(master, _Master):
                    runners["master"] = master
                batches = {
                    name: _batches(key_format, tp, n_batches, f"{name[0]}{key_format}")
                    for name in runners
                }
                secs = await _rounds(runners, batches, rounds)
                done = n_batches // rounds * rounds * BATCH
                rates = {
                    name: {RATE_NAMES[op]: done / sum(t) for op, t in by_op.items()}
                    for name, by_op in secs.items()
                }
                row: dict[str, Any] = {"ours": rates["ours"], "naive": rates["naive"]}
                row["ratio_vs_naive"], row["ratio_vs_naive_rounds"] = _ratios(secs, "naive")
                if "master" in secs:
                    out["mooncake_master"] = rates["master"]
                    ratios = _ratios(secs, "master")
                    out["ratio_vs_mooncake_mla"], out["ratio_vs_mooncake_mla_rounds"] = ratios
                out[key_format] = row
            finally:
                await drop_namespace(svc)
                await svc.aclose()
    finally:
        if isinstance(master, _Master):
            await master.target.close()
    return out


async def bench_round_trips(url: str, num_shards: int = 0) -> dict[str, Any]:
    """Redis commands and sequential waves per call on the hot path."""
    svc = await fresh_service(url, enable_radix_tree=True, num_shards=num_shards)
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
