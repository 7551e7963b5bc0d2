"""Shared helpers of the eviction tests: trees of stored blocks, invariant checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mooncake_redis import MasterService
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h

CLIENT = "evict-client"
OBJ = 1000  # bytes per object
# evict_leaves' ARGV head after the segments: no clocks to publish (lua/evict_leaves.lua)
NO_CLOCKS = [-1, 0, 0, ""]


def seg(i: int, size: int) -> Segment:
    return Segment(f"eseg{i}", f"enode{i}", base=(i + 1) << 40, size=size, te_endpoint="e:1")


async def evict_service(
    make_service: Any, capacity: int, *, segments: int = 1, **cfg: Any
) -> MasterService:
    cfg.setdefault("enable_radix_tree", True)
    cfg.setdefault("default_kv_lease_ttl_ms", 2_000)
    cfg.setdefault("eviction_high_watermark_ratio", 0.5)
    cfg.setdefault("eviction_ratio", 0.5)
    cfg.setdefault("evictor_lease_ttl_ms", 1_000)
    # The mechanics tests pick their goals as hw - eviction_ratio (0.0 by default: evict all).
    cfg.setdefault("radix_eviction_target", "watermark-ratio")
    svc: MasterService = await make_service(**cfg)
    for i in range(segments):
        await svc.mount_segment(seg(i, capacity // segments), CLIENT)
    return svc


async def put_blocks(
    svc: MasterService,
    blocks: Sequence[tuple[str, str]],
    *,
    keys_per_block: int = 1,
    size: int = OBJ,
    strict: bool = True,
    **cfg: Any,
) -> int:
    """Stores blocks (hash, parent hash) parent-first; each block has keys_per_block keys.
    Returns the keys stored; ``strict``: all of them must be (else refusals, e.g. of a child
    whose parent was evicted meanwhile, are allowed)."""
    keys: list[str] = []
    lengths: list[int] = []
    cfgs: list[ReplicateConfig] = []
    for blk, parent in blocks:
        for k in block_keys(blk, keys_per_block):
            keys.append(k)
            lengths.append(size)
            cfgs.append(ReplicateConfig(parent_block_hash=parent, **cfg))
    done = 0
    for start in range(0, len(keys), 256):
        part = slice(start, start + 256)
        res = await svc.batch_put_start(CLIENT, keys[part], lengths[part], cfgs[part])
        bad = [r for r in res if not isinstance(r, list)]
        assert not (strict and bad), bad[:3]
        ok = [k for k, r in zip(keys[part], res) if isinstance(r, list)]
        ends = await svc.batch_put_end(CLIENT, ok)
        assert all(e is None for e in ends), ends[:3]
        done += len(ok)
    return done


def block_keys(blk: str, n: int = 1) -> list[str]:
    return [blk] if n == 1 else [f"{blk}_{i}_k" for i in range(n)]


def chain(name: str, depth: int) -> list[tuple[str, str]]:
    hs = [h(f"{name}{i}") for i in range(depth)]
    return [(hs[i], hs[i - 1] if i else "") for i in range(depth)]


async def stored(svc: MasterService, key: str) -> bool:
    return bool(await svc.backend.client.exists(svc.keys.obj(svc.shard_of_key(key), key)))


async def assert_parents_alive(
    svc: MasterService, parents: dict[str, str], keys_per_block: int = 1
) -> None:
    """Children alive implies parent alive: a block with a stored key has every ancestor's keys
    stored (all of them: leaf atomicity), over the tree ``parents`` (block -> parent)."""
    alive: dict[str, list[bool]] = {}
    for blk in parents:
        alive[blk] = [await stored(svc, k) for k in block_keys(blk, keys_per_block)]
    for blk, flags in alive.items():
        assert all(flags) or not any(flags), f"block {blk[:8]} partially evicted"
        if any(flags):
            p = parents[blk]
            while p:
                assert all(alive[p]), f"child {blk[:8]} alive but ancestor {p[:8]} evicted"
                p = parents[p]


async def assert_clean(svc: MasterService) -> None:
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"][:5]
