"""Fuzzing key parsing and the radix calls (fakeredis, real Redis, Redis Cluster).

Hostile input: huge keys, binary and non-UTF-8 strings, Lua pattern and Redis glob characters,
hash-tag braces, NUL bytes; very deep chains (across shards and inside one shard); parent cycles
made through several nodes. Properties: valid input round-trips exactly and leaves no trace once
unregistered; rejected input changes nothing (byte for byte); cascades terminate; fsck names
cycles. ``MCR_FUZZ_EXAMPLES`` raises the example count (the long variant in docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mooncake_redis import ErrorCode, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.keys import shard_hash
from mooncake_redis.prefix import HASH_LEN, check_key, extract_prefix
from mooncake_redis.testing.probes import snapshot, snapshot_diff, wipe
from tests.helpers import h, hashes_in_shard

EXAMPLES = int(os.environ.get("MCR_FUZZ_EXAMPLES", "15"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Characters that mean something to Lua patterns, Redis glob patterns, hash tags, our own
# separators, terminals and C strings.
NASTY = "%.[]()*+-?^$\\{}_|:\x00\n\r\t \x7f\u00e9\u4e2d\U0001f600\ufeff"
nasty_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(NASTY), st.characters(blacklist_categories=("Cs",), max_codepoint=0x10FFFF)
    ),
    min_size=1,
    max_size=80,
)
huge_text = st.builds(
    lambda c, n: c * n, st.sampled_from(["{", "%", "a", "\u4e2d", "_"]), st.integers(3000, 4096)
)
valid_text = st.one_of(nasty_text, huge_text)


def own_prefix(value: str) -> bool:
    """A key that is its own prefix (RFC Design 4: no '_' at position 64)."""
    return value.find("_") != HASH_LEN


# ------------------------------------------------------------------------ key parsing (pure)
@settings(max_examples=EXAMPLES * 20, deadline=None)
@given(key=st.text(max_size=300))
def test_prefix_extraction_rule(key: str) -> None:
    p = extract_prefix(key)
    if key.find("_") == HASH_LEN:
        assert p == key[:HASH_LEN] and key.startswith(p)
    else:
        assert p == key
    assert extract_prefix(key, r"(?:^|_)([0-9a-f]{64})(?:_|$)") in (p, *_hex_runs(key))


def _hex_runs(key: str) -> list[str]:
    import re

    return [m.group(1) for m in re.finditer(r"(?:^|_)([0-9a-f]{64})(?:_|$)", key)]


@settings(max_examples=EXAMPLES * 20, deadline=None)
@given(value=st.one_of(st.text(max_size=200), st.binary(max_size=50), st.integers(), st.none()))
def test_key_checks_are_total(value: Any) -> None:
    """Every input is either accepted as a UTF-8 encodable str or refused with a Mooncake code."""
    try:
        k = check_key(value, 128)
    except MooncakeError as exc:
        assert exc.code in (ErrorCode.INVALID_PARAMS, ErrorCode.INVALID_KEY)
        return
    assert isinstance(k, str) and 0 < len(k) <= 128
    k.encode("utf-8")


@settings(max_examples=EXAMPLES * 20, deadline=None)
@given(value=st.text(max_size=200), shards=st.integers(1, 16384))
def test_shard_of_is_total_and_stable(value: str, shards: int) -> None:
    a = shard_hash(value) % shards
    assert 0 <= a < shards and a == shard_hash(value) % shards


# ------------------------------------------------------------------------ radix round trips
@FUZZ
@given(
    nodes=st.lists(valid_text.filter(own_prefix), min_size=1, max_size=6, unique=True),
    mha=st.lists(nasty_text, min_size=1, max_size=4, unique=True),
)
async def test_hostile_keys_round_trip(
    service: MasterService, nodes: list[str], mha: list[str]
) -> None:
    """A chain of hostile node hashes (each its own key) plus one 64-hex node with hostile MHA
    suffixes: everything reads back exactly, and unregistering leaves no node behind."""
    await wipe(service)
    block = h("mha-" + "|".join(mha))
    items: list[tuple[str, str, list[str]]] = [
        (n, nodes[i - 1] if i else "", [n]) for i, n in enumerate(nodes)
    ]
    mha_keys = [f"{block}_{s}" for s in mha]
    items.append((block, nodes[-1], mha_keys))
    assume(block not in nodes)
    res = await service.batch_register_radix_tree_node(items)
    assert res == [None] * len(items)
    for i, n in enumerate(nodes):
        node = await service.get_keys_by_prefix(n)
        assert node.keys == [n]
        assert node.parent_prefix_hash == (nodes[i - 1] if i else "")
        assert sorted(node.children) == sorted([nodes[i + 1] if i + 1 < len(nodes) else block])
    assert (await service.get_keys_by_prefix(block)).keys == sorted(mha_keys)
    sub = await service.get_subtree_keys(nodes[0], max_depth=len(nodes) + 1)
    assert sorted(sub.keys) == sorted([*nodes, *mha_keys])
    report = await fsck(service)
    assert report.clean, report.to_dict()
    assert report.counts["max_depth"] == len(nodes) + 1
    removed = await service.unregister_radix_tree_keys([*nodes, *mha_keys])
    assert removed == len(nodes) + len(mha_keys)
    report = await fsck(service)
    assert report.clean and report.counts["nodes"] == 0, report.to_dict()


bad_str = st.one_of(
    st.text(
        alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4
    ),
    st.builds(lambda a, b: a + "\udcff" + b, nasty_text, nasty_text),
    st.just(""),
    st.just("x" * 4097),
    st.binary(min_size=1, max_size=10),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
)


@FUZZ
@given(which=st.integers(0, 2), bad=bad_str)
async def test_rejected_register_changes_nothing(
    service: MasterService, which: int, bad: Any
) -> None:
    await wipe(service)
    A, B = h("keepA"), h("keepB")
    await service.batch_register_radix_tree_node([(A, "", [A]), (B, A, [B])])
    before = await snapshot(service)
    args: list[Any] = [h("new"), A, [h("new")]]
    if which == 2:
        args[2] = [bad]
    else:
        args[which] = bad
    if which == 1 and isinstance(bad, str) and bad == "":
        return  # an empty parent means "root": valid
    res = await service.batch_register_radix_tree_node([tuple(args)])
    assert isinstance(res[0], MooncakeError), args
    assert res[0].code in (ErrorCode.INVALID_PARAMS, ErrorCode.INVALID_KEY)
    assert snapshot_diff(before, await snapshot(service)) == []
    with pytest.raises(MooncakeError):
        await service.get_keys_by_prefix(bad)  # type: ignore[arg-type]
    if isinstance(bad, str) and bad:
        with pytest.raises(MooncakeError):
            await service.unregister_radix_tree_keys([bad, A])  # refused as a whole
        assert snapshot_diff(before, await snapshot(service)) == []


@FUZZ
@given(other=valid_text.filter(own_prefix))
async def test_parent_conflict_is_refused_without_trace(service: MasterService, other: str) -> None:
    """A node keeps its first parent: a register naming another parent is refused, and the edge
    the refused call linked in the other parent's shard (a shell, if it was new) is undone."""
    await wipe(service)
    P, C = h("parent"), h("child")
    assume(other not in (P, C))
    await service.batch_register_radix_tree_node([(P, "", [P]), (C, P, [C])])
    before = await snapshot(service)
    res = await service.batch_register_radix_tree_node([(C, other, [C])])
    assert isinstance(res[0], MooncakeError) and res[0].code == ErrorCode.INVALID_PARAMS
    assert snapshot_diff(before, await snapshot(service)) == []


# ------------------------------------------------------------------------ deep chains
async def test_deep_chain_across_shards(service: MasterService) -> None:
    """400 levels (deeper than the conversation trace's 247), one node per level across 8
    shards: register in one batch, then the cascade from the leaf walks all the way up."""
    depth = 400
    chain = [h(f"deep{i}") for i in range(depth)]
    items = [(c, chain[i - 1] if i else "", [c]) for i, c in enumerate(chain)]
    assert await service.batch_register_radix_tree_node(items) == [None] * depth
    report = await fsck(service)
    assert report.clean and report.counts["max_depth"] == depth
    sub = await service.get_subtree_keys(chain[0], max_depth=depth)
    assert len(sub.nodes) == depth and not sub.truncated
    # Interior keys go first (each node becomes a shell with one child), then the leaf.
    await service.unregister_radix_tree_keys(chain[:-1])
    assert (await fsck(service)).counts["shells"] == depth - 1
    await service.unregister_radix_tree_keys(chain[-1:])
    report = await fsck(service)
    assert report.clean and report.counts["nodes"] == 0, report.to_dict()


async def test_very_deep_chain_in_one_shard(make_service: Any) -> None:
    """One shard: the whole 3000-level cascade runs inside radix_unregister's collapse loop."""
    svc: MasterService = await make_service(num_shards=1, enable_radix_tree=True)
    depth = 3000
    chain = [h(f"one{i}") for i in range(depth)]
    items = [(c, chain[i - 1] if i else "", [c]) for i, c in enumerate(chain)]
    assert await svc.batch_register_radix_tree_node(items) == [None] * depth
    await svc.unregister_radix_tree_keys(chain[:-1])
    assert (await fsck(svc)).counts["shells"] == depth - 1
    assert await svc.unregister_radix_tree_keys(chain[-1:]) == 1
    report = await fsck(svc)
    assert report.clean and report.counts["nodes"] == 0


# ------------------------------------------------------------------------ cycles
@FUZZ
@given(
    ring=st.integers(2, 6),
    shards=st.lists(st.integers(0, 7), min_size=6, max_size=6),
    tail=st.booleans(),
    order=st.randoms(use_true_random=False),
)
async def test_parent_cycles_are_refused(
    service: MasterService, ring: int, shards: list[int], tail: bool, order: Any
) -> None:
    """A parent ring through ``ring`` nodes, registered one by one in random order: the call
    that would close the ring is refused (INVALID_PARAMS), every other one accepted; no cycle
    remains, queries and cascades terminate, and fsck is clean."""
    await wipe(service)
    tag = f"ring{ring}-{'-'.join(map(str, shards))}-"
    nodes = [next(hashes_in_shard(service, shards[i], tag + str(i))) for i in range(ring)]
    items = [(n, nodes[i - 1], [n]) for i, n in enumerate(nodes)]  # nodes[0]'s parent: the last
    order.shuffle(items)
    extra = []
    if tail:
        t = h(tag + "tail")
        extra = [(t, nodes[0], [t])]
    for item in items[:-1]:
        assert await service.batch_register_radix_tree_node([item]) == [None]
    [refused] = await service.batch_register_radix_tree_node([items[-1]])
    assert refused is not None and refused.code == ErrorCode.INVALID_PARAMS, refused
    assert "cycle" in refused.message
    for item in extra:
        assert await service.batch_register_radix_tree_node([item]) == [None]
    report = await fsck(service)
    assert report.clean, report.to_dict()
    sub = await asyncio.wait_for(service.get_subtree_keys(nodes[0], max_depth=50), 10)
    assert nodes[0] in sub.nodes
    # Unregister everything: every cascade ends and nothing is left.
    keys = [it[0] for it in items[:-1]] + [e[0] for e in extra]
    assert await asyncio.wait_for(service.unregister_radix_tree_keys(keys), 10) == len(keys)
    await service.unregister_radix_tree_keys([items[-1][0]])
    report = await asyncio.wait_for(fsck(service), 10)
    assert report.clean and report.counts["nodes"] == 0, report.to_dict()
