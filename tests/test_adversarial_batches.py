"""Issue 14 item 6: a batch of any size the API accepts succeeds (no commit-deadline failures).

batch_put_start used to reserve the whole batch, then commit it; with 100,000 keys 17 % of the
items failed with "allocation older than the commit deadline". It now reserves and commits in
bounded chunks (halved when one takes over a quarter of the deadline). CI runs 20,000 keys on the
real Redis and the cluster and 6,000 on fakeredis (about 50 times slower per key), each with a
commit deadline short enough that today's code misses it just the same; the 100,000-key run
with the default deadline is the slow variant (``pytest -m slow``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from blake3 import blake3

from mooncake_redis import Config, MasterService, MooncakeError
from mooncake_redis.models import ReplicateConfig, Segment
from tests.conftest import _cleanup


async def _huge_batch(svc: Any, n: int) -> None:
    await svc.mount_segment(Segment("s", "s", 1 << 40, n * 64), "c")
    blocks = [blake3(f"big{i}".encode()).hexdigest() for i in range(n)]
    # Chains of 50 blocks inside the batch (the guard accepts parents of the same batch).
    cfgs = [ReplicateConfig(parent_block_hash=blocks[i - 1] if i % 50 else "") for i in range(n)]
    res = await svc.batch_put_start("c", blocks, [[64]] * n, cfgs)
    bad = [r for r in res if isinstance(r, MooncakeError)]
    assert not bad, (len(bad), bad[:3])
    assert await svc.batch_put_end("c", blocks) == [None] * n
    assert all(await svc.batch_exist_key(blocks))
    [st] = await svc.segment_stats()
    assert st.allocated == n * 64 == st.size and st.pending == n
    assert (await svc.shard_totals("objects"))["objects"] == n
    node = await svc.get_keys_by_prefix(blocks[49])
    assert node.parent_prefix_hash == blocks[48] and node.keys == [blocks[49]]


async def test_a_huge_batch_put_succeeds_whole(make_service: Any, backend_url: str) -> None:
    fake = backend_url.startswith("fakeredis")
    svc = await make_service(
        enable_radix_tree=True,
        num_shards=16,
        # (a deadline well under the batch's time, so only the adaptive chunks keep it, but not
        # so tight that one stall of a loaded CI machine misses it)
        alloc_commit_deadline_ms=3_000 if fake else 2_500,
        alloc_reclaim_grace_ms=6_000,
    )
    await _huge_batch(svc, 6_000 if fake else 20_000)


@pytest.mark.slow
async def test_a_100k_batch_put_succeeds_whole(real_backend_url: str) -> None:
    """The issue's figure: 100,000 keys, default deadline (10 s), on the real servers (it also
    passes on fakeredis, in about 3 minutes)."""
    ns = "t" + uuid.uuid4().hex[:12]
    cfg = Config(namespace=ns, redis_url=real_backend_url, enable_radix_tree=True)
    svc = await MasterService.from_url(real_backend_url, cfg)
    try:
        t0 = time.perf_counter()
        await _huge_batch(svc, 100_000)
        print(f"100,000-key batch put + end + exists + checks: {time.perf_counter() - t0:.1f} s")
    finally:
        await svc.aclose()
        _cleanup(real_backend_url, ns)
