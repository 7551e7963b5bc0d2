"""The eviction read steps' cheap paths: decimal sums as Lua numbers, parents sent as their nodes
store them (decoded in Python), and the merged first read of every shard's leaf index.

Each path has a slow twin kept for the values it cannot hold (digit strings past 15 digits,
lengths past 10 hex digits, parents that are not 64 hex digits); both must give the same
answers, on fakeredis, Redis and Redis Cluster."""

from __future__ import annotations

from typing import Any

import lupa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mooncake_redis import MasterService
from mooncake_redis import lua_calls as lua
from mooncake_redis.keys import node_parent_field
from mooncake_redis.lua_loader import lua_dir
from mooncake_redis.records import node_parent_hash
from tests.eviction_helpers import (
    OBJ,
    assert_clean,
    assert_parents_alive,
    chain,
    evict_service,
    put_blocks,
)
from tests.helpers import h, record_calls

_runtime: Any = None


def _u64_lua(name: str) -> Any:
    """A function of u64.lua in a Lua 5.1 runtime, as Redis runs it (u64.lua needs nothing)."""
    global _runtime
    if _runtime is None:
        lua51 = getattr(lupa, "lua51", None)
        _runtime = (lua51.LuaRuntime if lua51 else lupa.LuaRuntime)(encoding=None)
    src = (lua_dir() / "includes" / "u64.lua").read_text()
    return _runtime.execute(src + f"\nreturn {name}")


def _dec_add() -> Any:
    return _u64_lua("dec_add")


digits = st.integers(min_value=0, max_value=10**25).map(str)


@given(digits, digits)
def test_dec_add_adds_exactly_on_both_paths(a: str, b: str) -> None:
    got = _dec_add()(a.encode(), b.encode())
    assert int(got) == int(a) + int(b)
    assert got == str(int(a) + int(b)).encode()


@given(digits, digits)
def test_dec_sub_subtracts_floored_at_zero_on_both_paths(a: str, b: str) -> None:
    """max(a - b, 0): as numbers up to 15 digits each (evict_flush's counters), in digits past."""
    got = _u64_lua("dec_sub")(a.encode(), b.encode())
    assert got == str(max(int(a) - int(b), 0)).encode()


def test_node_parent_hash_reads_what_node_parent_field_writes() -> None:
    for parent in (h("p"), "free-form parent", "é/<>", ""):
        assert node_parent_hash(node_parent_field(parent)) == parent
        assert node_parent_hash(node_parent_field(parent).decode("latin-1").encode("latin-1")) == (
            parent
        )
    with pytest.raises(ValueError):
        node_parent_hash(b">short")


_HEX_CASES = [
    "0" * 64,
    "f" * 64,
    "0123456789abcdef" * 4,
    "000000000001" * 5 + "ffff",
    "ffffffffffff" * 5 + "0000",
    h("a"),
    h("b"),
]
_HEX_PROBE = """
local out = {}
for i, x in ipairs(ARGV) do
  local b = radix_unhex32(x)
  out[i] = {b, radix_hex32(b)}
end
return out
"""


def _radix_hex_source() -> str:
    from mooncake_redis.lua_loader import expand

    return expand("--!include radix.lua", lua_dir() / "includes")


def test_radix_hex_forms_round_trip_on_redis(redis_url: str) -> None:
    """Redis runs the struct.pack / struct.unpack forms: 32 bytes, 64 lowercase hex back."""
    import redis

    r = redis.Redis.from_url(redis_url)
    try:
        assert r.eval("return struct ~= nil", 0) == 1
        got = r.eval(_radix_hex_source() + _HEX_PROBE, 0, *_HEX_CASES)
    finally:
        r.close()
    assert got == [[bytes.fromhex(x), x.encode()] for x in _HEX_CASES]


def test_radix_hex_forms_round_trip_without_struct() -> None:
    """fakeredis's Lua has no struct library: the arithmetic forms run there, with the same
    answers (a plain Lua 5.1 runtime, as fakeredis's)."""
    lua51 = getattr(lupa, "lua51", None)
    rt = (lua51.LuaRuntime if lua51 else lupa.LuaRuntime)(encoding=None)
    rt.execute("K, F = {}, {}")  # radix.lua's key and field tables come from keys.lua
    src = _radix_hex_source()
    fns = rt.execute(src + "\nreturn {radix_unhex32, radix_hex32, struct == nil}")
    assert fns[3]
    for x in _HEX_CASES:
        b = fns[1](x.encode())
        assert b == bytes.fromhex(x)
        assert fns[2](b) == x.encode()


def _chain(names: list[str]) -> list[tuple[str, str]]:
    return [(n, names[i - 1] if i else "") for i, n in enumerate(names)]


@pytest.mark.parametrize("form", ["hex", "free"])
async def test_chains_go_leaf_first_whatever_the_parent_form(make_service: Any, form: str) -> None:
    """Parents come back from the reads as their nodes store them ('>' + 32 bytes for a 64-hex
    hash, '<' + the text otherwise) and are decoded in Python; evict_ancestors decodes only the
    ones it climbs to. Two chains over many shards: each goes leaf first, parents stay alive."""
    name = (lambda c, i: h(f"{c}{i}")) if form == "hex" else (lambda c, i: f"blk-{c}-{i}")
    a = [name("a", i) for i in range(30)]
    b = [name("b", i) for i in range(30)]
    svc = await evict_service(make_service, 80 * OBJ, eviction_ratio=0.5, num_shards=16)
    await put_blocks(svc, _chain(a) + _chain(b))
    res = await svc.evict_once()
    assert res.evicted_objects == 60 and res.cascade_depth == 30
    order = [leaf for r in res.round_leaves for leaf in r]
    for c in (a, b):
        mine = [x for x in order if x in set(c)]
        assert mine == list(reversed(c))
    await assert_parents_alive(svc, dict(_chain(a) + _chain(b)))
    await assert_clean(svc)


async def test_first_read_merges_many_shards_in_index_order(make_service: Any) -> None:
    """The merged first read (``want`` > 0, a heap over the shards' index heads) walks each
    shard for its share of the first ``want`` entries of its node's shards in (score, member)
    order, at most ``max`` a shard: exactly those leaves come back. Then a pass (default tiered
    policy, which reads so) evicts in that order."""
    svc = await evict_service(
        make_service, 1000 * OBJ, num_shards=64, eviction_high_watermark_ratio=0.95
    )
    leaves = [h(f"leaf{i}") for i in range(600)]
    await put_blocks(svc, [(x, "") for x in leaves])
    client = svc.backend.client
    by_node: dict[str, list[tuple[float, str]]] = {}
    index: list[tuple[float, str]] = []
    for shard in range(64):
        rows = await client.zrange(svc.keys.shard_key(shard, "leaves"), 0, -1, withscores=True)
        entries = [(float(score), m.decode()) for m, score in rows]
        index += entries
        node = svc.backend.node_of(svc.keys.anchor(shard)).name if svc.backend.cluster else ""
        by_node.setdefault(node, []).extend(entries[:4])  # a head holds at most max entries
    assert len(index) == 600
    want = 12
    cursors = [(s, "", "") for s in range(64)]
    _, windows, _ = await lua.evict_candidates(svc.ctx, cursors, 4, 80, want)
    got = sorted(row.h for w in windows for row in w.rows)
    assert got == sorted(m for heads in by_node.values() for _, m in sorted(heads)[:want])
    res = await svc.evict_once(max_objects=8)
    order = [leaf for r in res.round_leaves for leaf in r]
    assert order == [m for _, m in sorted(index)][:8]
    await assert_clean(svc)


async def _rounds_run(svc: MasterService) -> tuple[list[Any], int]:
    """Passes of several goals over chains with branches, a found leaf and young leaves: the
    leaves each pass's rounds chose, in order; and the evict_ancestors calls."""
    calls = record_calls(svc)
    blocks = []
    for c in range(5):
        trunk = chain(f"t{c}", 6)
        blocks += trunk
        blocks += [(h(f"b{c}{j}"), trunk[2 + j % 3][0]) for j in range(3)]  # side branches
    blocks += [(h(f"root{i}"), "") for i in range(6)]
    await put_blocks(svc, blocks)
    assert await svc.exist_key(h("t13"))  # found: its subtree goes later
    out: list[Any] = []
    for i, goal in enumerate([{"max_objects": 7}, {"max_objects": 1}, {"force": True}]):
        res = await svc.evict_once(**goal)
        out.append(res.round_leaves)
        await put_blocks(svc, [(h(f"young{i}{j}"), "") for j in range(3)], strict=False)
    return out, [c.name for c in calls].count("evict_ancestors")


@pytest.mark.parametrize("shards", [1, 8])
async def test_first_ancestors_read_ahead_chooses_the_same(
    make_service: Any, monkeypatch: pytest.MonkeyPatch, shards: int
) -> None:
    """The pass's first candidates read reads ahead its first ancestors read (the tiered
    order): every round chooses the same leaves in the same order as without it, and where one
    call reads every shard (a single Redis, or one shard) some passes make no evict_ancestors
    call."""
    from mooncake_redis.eviction.radix_evict import RadixEvictor
    from mooncake_redis.testing.probes import wipe

    cfg = {"num_shards": shards, "default_kv_lease_ttl_ms": 0, "eviction_ratio": 0.3}
    svc = await evict_service(make_service, 60 * OBJ, **cfg)
    with monkeypatch.context() as m:
        m.setattr(RadixEvictor, "_read_ahead", lambda self: None)
        ref, ref_reads = await _rounds_run(svc)
    await wipe(svc)
    svc = await evict_service(make_service, 60 * OBJ, **cfg)
    got, reads = await _rounds_run(svc)
    assert got == ref
    assert sum(len(r) for rounds in got for r in rounds) > 10
    # A read ahead that is not exactly the read asked for is never used: here each one is
    # replaced by chains that say 'gone' for nodes one level deeper than read.
    real = lua.evict_candidates

    async def poisoned(*args: Any, **kw: Any) -> Any:
        n, windows, ahead = await real(*args, **kw)
        if ahead is not None:
            nodes = [(p, ps, d + 1) for p, ps, d in ahead[0]]
            ahead = (nodes, [[lua.AncestorRow("gone", 0, ps, None)] for _, ps, _ in nodes])
        return n, windows, ahead

    await wipe(svc)
    svc = await evict_service(make_service, 60 * OBJ, **cfg)
    with monkeypatch.context() as m:
        m.setattr(lua, "evict_candidates", poisoned)
        assert (await _rounds_run(svc))[0] == ref
    if svc.backend.cluster and shards > 1:
        assert reads == ref_reads  # a read of several nodes' shards: no read ahead
    else:
        assert reads < ref_reads
