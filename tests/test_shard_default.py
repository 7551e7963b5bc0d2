"""The shard count a namespace gets when none is given (``num_shards`` 0, the default).

Shards spread a cluster's slots over its nodes; on one Redis they only add per-shard work to
every batch call, so a new namespace gets 1 shard there and 64 on a cluster. A namespace that
exists keeps its recorded count: a process that leaves the count to the store adopts it (an
explicit other count is refused, as before), but only at its first check: a namespace recorded
anew while it runs is refused, never re-read under its feet. Every path the store has still
works on the default count (the other tests pin 8 shards, for the cross-shard paths).
"""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis import Config, ErrorCode, MasterService, MooncakeError
from mooncake_redis.config import CLUSTER_SHARDS, SINGLE_REDIS_SHARDS
from mooncake_redis.lua_calls import META_FIELDS
from mooncake_redis.models import ReplicateConfig
from tests.eviction_helpers import assert_clean, chain, evict_service, put_blocks, seg
from tests.helpers import h

CLIENT = "c-shards"


def expected(url: str) -> int:
    return CLUSTER_SHARDS if "+cluster" in url else SINGLE_REDIS_SHARDS


async def recorded_shards(svc: MasterService) -> int:
    meta = svc.ctx.keys.global_key("meta")
    raw = await svc.backend.command("HGET", meta, META_FIELDS["num_shards"])
    return int(raw)


async def test_a_new_namespace_gets_the_topology_default(
    make_service: Any, backend_url: str
) -> None:
    svc = await make_service(num_shards=0, enable_radix_tree=True)
    assert svc.config.num_shards == expected(backend_url)
    assert svc.ctx.keys.num_shards == expected(backend_url)
    assert await recorded_shards(svc) == expected(backend_url)
    assert Config().num_shards == 0  # the default leaves it to the store


async def test_an_existing_namespace_keeps_its_count(make_service: Any, backend_url: str) -> None:
    first = await make_service(num_shards=8, enable_radix_tree=True)
    later = await make_service(num_shards=0, enable_radix_tree=True)
    assert later.config.num_shards == 8 and later.ctx.keys.num_shards == 8
    assert await recorded_shards(later) == 8
    # The two agree on every key's shard: what one stores, the other finds.
    await first.mount_segment(seg(0, 1 << 24), CLIENT)
    blocks = [(h(f"keep{i}"), h(f"keep{i - 1}") if i else "") for i in range(6)]
    assert await put_blocks(first, blocks) == 6
    assert await later.batch_exist_key([b for b, _ in blocks]) == [True] * 6
    assert (await later.get_keys_by_prefix(blocks[3][0])).keys == [blocks[3][0]]
    # An explicit other count is still refused, and says how to adopt the recorded one.
    with pytest.raises(MooncakeError) as exc:
        await make_service(num_shards=4, enable_radix_tree=True)
    assert exc.value.code == ErrorCode.INVALID_VERSION
    assert "num_shards=8" in str(exc.value) and "num_shards 0 adopts" in str(exc.value)


async def test_a_namespace_recorded_anew_is_refused_not_adopted(
    make_service: Any, backend_url: str
) -> None:
    svc = await make_service(num_shards=0, enable_radix_tree=True)
    mine = svc.config.num_shards
    other = 3 if mine != 3 else 5
    # Another process records the namespace anew (its Redis lost the meta) with another count.
    meta = svc.ctx.keys.global_key("meta")
    await svc.backend.command("HSET", meta, META_FIELDS["num_shards"], str(other))
    with pytest.raises(MooncakeError) as exc:
        await svc.check_meta()
    assert exc.value.code == ErrorCode.INVALID_VERSION
    assert svc.config.num_shards == mine  # not re-read under the running parts


async def test_the_default_count_serves_every_path(make_service: Any, backend_url: str) -> None:
    """Puts with parents, exists, prefix reads, remove, an eviction pass and fsck on the
    default count (1 shard on one Redis: every parent and child in one shard)."""
    svc = await evict_service(make_service, 64 * 4096, num_shards=0, default_kv_lease_ttl_ms=0)
    assert svc.config.num_shards == expected(backend_url)
    main = chain("dflt", 12)
    blocks = [*main, (h("dflt-side"), main[3][0])]
    assert await put_blocks(svc, blocks) == 13
    hashes = [b for b, _ in blocks]
    assert await svc.batch_exist_key(hashes) == [True] * 13
    assert (await svc.get_keys_by_prefix(hashes[5])).keys == [hashes[5]]
    await svc.remove(hashes[-1])
    assert await svc.exist_key(hashes[-1]) is False
    # A cycle is still refused: a second key of the chain's root under its own descendant.
    with pytest.raises(MooncakeError) as exc:
        await svc.put_start(
            CLIENT, hashes[0] + "_1", [4096], ReplicateConfig(parent_block_hash=hashes[7])
        )
    assert exc.value.code == ErrorCode.INVALID_PARAMS and "cycle" in str(exc.value)
    result = await svc.evict_once(max_objects=4)
    assert result.evicted_objects == 4
    alive = await svc.batch_exist_key(hashes[:12])
    # Leaf first: the chain's deepest blocks went, every surviving block's parent survives.
    assert alive == [True] * 8 + [False] * 4, alive
    await assert_clean(svc)
