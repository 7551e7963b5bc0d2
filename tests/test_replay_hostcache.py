"""The engines' leaf-first LRU host cache."""

from __future__ import annotations

from mooncake_redis.replay.hostcache import EngineFleet, LeafFirstLRU


def test_prefix_match_and_whole_chain_cached() -> None:
    c: LeafFirstLRU[int] = LeafFirstLRU(10)
    c.access([1, 2, 3])
    assert c.match([1, 2, 3, 4]) == 3
    assert len(c) == 3


def test_evicts_leaves_first_even_if_parent_is_older() -> None:
    c: LeafFirstLRU[int] = LeafFirstLRU(4)
    c.access([1, 2, 3])  # chain 1-2-3 (1 and 2 are not leaves)
    c.access([9])  # a newer root
    evicted = c.access([10])  # full: the LRU *leaf* is 3, never 1 or 2
    assert evicted == [3]
    assert 1 in c and 2 in c
    evicted = c.access([11])  # now 2 is a leaf and the LRU one
    assert evicted == [2]


def test_recency_protects_touched_chain() -> None:
    c: LeafFirstLRU[int] = LeafFirstLRU(4)
    c.access([1, 2])
    c.access([5, 6])
    c.access([1, 2])  # refresh chain 1-2
    assert c.access([7]) == [6]
    assert c.match([1, 2]) == 2


def test_cache_stays_prefix_closed_under_pressure() -> None:
    import random

    rng = random.Random(1)
    c: LeafFirstLRU[int] = LeafFirstLRU(50)
    parent: dict[int, int | None] = {}
    for _ in range(2000):
        root = rng.randrange(5)
        chain = [root] + [(root + 1) * 1000 + i for i in range(1, rng.randint(1, 30))]
        for i, b in enumerate(chain):
            parent[b] = chain[i - 1] if i else None
        c.access(chain)
        assert len(c) <= 50
        for b in list(c._entries):
            p = parent[b]
            assert p is None or p in c


def test_chain_longer_than_capacity_keeps_its_head() -> None:
    c: LeafFirstLRU[int] = LeafFirstLRU(3)
    c.access([1, 2, 3, 4, 5])
    assert c.match([1, 2, 3, 4, 5]) == 3


def test_fleet_routing_is_seeded() -> None:
    a = EngineFleet(4, 10, seed=7)
    b = EngineFleet(4, 10, seed=7)
    routes = [a.route() for _ in range(50)]
    assert routes == [b.route() for _ in range(50)]
    assert set(routes) == {0, 1, 2, 3}
