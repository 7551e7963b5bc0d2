"""Mooncake's BatchEvict (radix index disabled) on three backends: object-count ratios, pass 1
per shard by oldest lease, pass 2 to the lower bound, soft-pinned last, hard-pinned and leased
never; and the durable "allocation failed" flag."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from mooncake_redis import MasterService
from mooncake_redis.eviction.batch_evict import ratios
from tests.eviction_helpers import OBJ, assert_clean, evict_service, put_blocks, stored
from tests.helpers import h


async def put_one_by_one(svc: MasterService, names: list[str], **cfg: Any) -> list[str]:
    keys = [h(n) for n in names]
    for k in keys:  # distinct put times = distinct lease timeouts (no threshold ties)
        await put_blocks(svc, [(k, "")], **cfg)
        await asyncio.sleep(0.002)
    return keys


def test_ratios_are_mooncakes() -> None:
    assert ratios(1.0, 0.9, 0.05) == (max(0.05, 1.0 - 0.9 + 0.05), max(0.075, 1.0 - 0.9))
    t, lb = ratios(0.5, 0.95, 0.05)
    assert t == 0.05 and lb == 0.025


async def test_pass1_object_count_target(make_service: Any) -> None:
    svc = await evict_service(
        make_service,
        40 * OBJ,
        enable_radix_tree=False,
        eviction_high_watermark_ratio=0.9,
        eviction_ratio=0.05,
    )
    keys = await put_one_by_one(svc, [f"b{i}" for i in range(40)])
    assert await svc.exist_key(keys[0])  # leased: never evicted
    res = await svc.evict_once()
    assert res.mode == "batch" and res.reason == "watermark"
    target, _ = ratios(1.0, 0.9, 0.05)
    assert res.evicted_objects == math.ceil(40 * target)  # 6 of 40 by count
    assert keys[0] not in res.evicted_keys and await stored(svc, keys[0])
    assert res.bytes == res.evicted_objects * OBJ
    assert (await svc.usage()).allocated == (40 - res.evicted_objects) * OBJ
    await assert_clean(svc)


async def test_pass2_soft_pinned_last_hard_never(make_service: Any) -> None:
    svc = await evict_service(
        make_service,
        20 * OBJ,
        enable_radix_tree=False,
        eviction_high_watermark_ratio=0.5,
        eviction_ratio=0.5,
    )
    plain = await put_one_by_one(svc, [f"p{i}" for i in range(3)])
    hard = await put_one_by_one(svc, [f"hd{i}" for i in range(2)], with_hard_pin=True)
    soft = await put_one_by_one(svc, [f"s{i}" for i in range(15)], with_soft_pin=True)
    # used 1.0: target 1.0 (pass 1: every not-pinned object), lower bound 0.5: 10 of 20
    res = await svc.evict_once()
    assert set(plain) <= set(res.evicted_keys)
    assert not set(hard) & set(res.evicted_keys)
    assert res.evicted_objects == 10 and res.soft_pinned_objects == 7
    assert {k for k in res.evicted_keys if k in soft} == set(soft[:7])  # oldest soft pins
    assert res.rounds == 2
    await assert_clean(svc)


async def test_soft_pinned_kept_when_not_allowed(make_service: Any) -> None:
    svc = await evict_service(
        make_service,
        20 * OBJ,
        enable_radix_tree=False,
        allow_evict_soft_pinned_objects=False,
    )
    await put_one_by_one(svc, [f"q{i}" for i in range(2)])
    await put_one_by_one(svc, [f"r{i}" for i in range(14)], with_soft_pin=True)
    res = await svc.evict_once()
    assert res.evicted_objects == 2 and res.soft_pinned_objects == 0


async def test_threshold_ties_go_together(make_service: Any) -> None:
    svc = await evict_service(
        make_service,
        100 * OBJ,
        enable_radix_tree=False,
        num_shards=1,
        eviction_high_watermark_ratio=0.9,
        eviction_ratio=0.05,
    )
    # one batch: all 100 leases equal, so the nth-lease cut takes every tie (as Mooncake)
    await put_blocks(svc, [(h(f"t{i}"), "") for i in range(100)])
    leases = {
        int(float(x[1]))
        for x in await svc.backend.client.zrange(
            svc.keys.shard_key(0, "lru"), 0, -1, withscores=True
        )
    }
    res = await svc.evict_once()
    if len(leases) == 1:
        assert res.evicted_objects == 100
    else:
        assert res.evicted_objects >= 15


async def test_allocation_failure_flag_triggers_and_clears(make_service: Any) -> None:
    svc = await evict_service(
        make_service, 10 * OBJ, enable_radix_tree=False, eviction_high_watermark_ratio=0.95
    )
    await put_one_by_one(svc, [f"f{i}" for i in range(9)])
    assert (await svc.evict_once()).reason == "idle"  # 0.9 <= 0.95
    # a put that does not fit: NO_AVAILABLE_HANDLE and the durable flag
    res = await svc.batch_put_start("evict-client", [h("big")], [[5 * OBJ]])
    assert not isinstance(res[0], list)
    assert await svc.backend.client.get(svc.keys.global_key("evict_needed"))
    out = await svc.evict_once()
    assert out.reason == "alloc_failed" and out.evicted_objects >= 1
    assert not await svc.backend.client.get(svc.keys.global_key("evict_needed"))
    await assert_clean(svc)


async def test_radix_mode_alloc_failed(make_service: Any) -> None:
    svc = await evict_service(make_service, 10 * OBJ, eviction_high_watermark_ratio=0.95)
    await put_blocks(svc, [(h(f"ra{i}"), "") for i in range(9)])
    await svc.backend.client.set(svc.keys.global_key("evict_needed"), 1)
    out = await svc.evict_once()
    # down to 0.95 - 0.5 = 0.45, and at least eviction_ratio (0.5) of the capacity
    assert out.reason == "alloc_failed" and out.bytes >= 5 * OBJ and out.used_after <= 0.45
    assert not await svc.backend.client.get(svc.keys.global_key("evict_needed"))
