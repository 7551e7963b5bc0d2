"""``mooncake-redis evictor --once`` from the shell, the serve hook, and policy parsing."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.cli import main
from mooncake_redis.eviction.policy import get_policy
from tests.eviction_helpers import OBJ, chain, put_blocks, seg


def test_evictor_once_json(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"fakeredis://{uuid.uuid4().hex}"
    cfg = Config(
        redis_url=url,
        namespace="cli",
        num_shards=8,
        enable_radix_tree=True,
        eviction_high_watermark_ratio=0.5,
        eviction_ratio=0.5,
        radix_eviction_target="watermark-ratio",
    )

    async def setup() -> None:
        svc = await MasterService.from_url(url, cfg)
        await svc.mount_segment(seg(0, 10 * OBJ), "c")
        await put_blocks(svc, chain("cli", 8))
        await svc.aclose()

    asyncio.run(setup())
    argv = ["evictor", "--redis-url", url, "--namespace", "cli", "--num-shards", "8"]
    argv += ["--enable-radix-tree", "--once", "--json"]
    import os

    env = {
        "MOONCAKE_REDIS_EVICTION_HIGH_WATERMARK_RATIO": "0.5",
        "MOONCAKE_REDIS_EVICTION_RATIO": "0.5",
        "MOONCAKE_REDIS_RADIX_EVICTION_TARGET": "watermark-ratio",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert main(argv) == 0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["mode"] == "radix" and out["evicted_objects"] == 8 and out["cascade_depth"] == 8


def test_policies() -> None:
    assert get_policy("lru").score(5.0, 100) == 5.0
    p = get_policy("lru-freq:1000")
    assert p.score(5.0, 0) == 5.0 and p.score(5.0, 1) == 1005.0 and p.score(5.0, 3) == 2005.0
    assert get_policy("lru-freq", Config(default_kv_lease_ttl_ms=10)).score(0, 1) == 10.0
    for bad in ("lfu", "lru-freq:x", "lru-freq:-1", "lru:3"):
        with pytest.raises(MooncakeError) as e:
            get_policy(bad)
        assert e.value.code == ErrorCode.INVALID_PARAMS
