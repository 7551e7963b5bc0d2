"""Config, key schema, prefix extraction and the Lua loader: no server needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.crc import key_slot

from mooncake_redis import Config, ErrorCode, MooncakeError
from mooncake_redis.keys import KeySchema
from mooncake_redis.lua_loader import (
    LuaLoadError,
    drop_unused,
    load_all,
    parse,
    strip_comment_lines,
)
from mooncake_redis.prefix import extract_prefix
from tests.helpers import h

HDR = "#!lua flags=allow-oom\n-- t\n-- KEYS: x\n-- ARGV: y\n-- Returns: z\n"


def test_config_defaults_follow_mooncake_r() -> None:
    c = Config()
    assert not c.enable_radix_tree and c.num_shards == 0 and c.namespace == "mc"
    # 0: by topology for a new namespace (one shard on one Redis, 64 on a cluster)
    assert (c.default_shards(cluster=False), c.default_shards(cluster=True)) == (1, 64)
    assert Config(num_shards=8).default_shards(cluster=True) == 8
    assert c.default_kv_lease_ttl_ms == 5000 and c.eviction_high_watermark_ratio == 0.95
    assert c.put_start_discard_timeout_ms == 30_000 and c.put_start_release_timeout_ms == 600_000
    assert c.client_live_ttl_ms == 10_000 and c.eviction_ratio == 0.05
    assert c.default_kv_soft_pin_ttl_ms == 30 * 60 * 1000 and c.allow_evict_soft_pinned_objects


def test_config_from_env_and_overrides() -> None:
    env = {
        "MOONCAKE_REDIS_NUM_SHARDS": "16",
        "MOONCAKE_REDIS_ENABLE_RADIX_TREE": "true",
        "MOONCAKE_REDIS_EVICTION_RATIO": "0.1",
        "MOONCAKE_REDIS_KEY_HASH_PATTERN": r"_([0-9a-f]{64})_",
    }
    c = Config.from_env(env, namespace="x")
    assert c.num_shards == 16 and c.enable_radix_tree and c.eviction_ratio == 0.1
    assert c.namespace == "x" and c.key_hash_pattern == r"_([0-9a-f]{64})_"
    with pytest.raises(MooncakeError) as exc:
        Config.from_env({"MOONCAKE_REDIS_NUM_SHARDS": "many"})
    assert exc.value.code == ErrorCode.INVALID_PARAMS and "MOONCAKE_REDIS_NUM_SHARDS" in str(
        exc.value
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"num_shards": -1},
        {"num_shards": 16385},
        {"namespace": "a{b}"},
        {"put_start_release_timeout_ms": 10, "put_start_discard_timeout_ms": 20},
        {"eviction_ratio": 1.5},
        {"key_hash_pattern": "("},
        {"key_hash_pattern": "[0-9a-f]{64}"},
    ],
)
def test_config_rejects_bad_values(changes: dict[str, object]) -> None:
    with pytest.raises(MooncakeError) as exc:
        Config(**changes)  # type: ignore[arg-type]
    assert exc.value.code == ErrorCode.INVALID_PARAMS


def test_prefix_extraction_rfc_design_4() -> None:
    blk = h("x")
    assert extract_prefix(blk) == blk  # MLA: whole key
    assert extract_prefix(f"{blk}_0_k") == blk  # MHA
    assert extract_prefix(f"{blk}_0_k_tp_3") == blk  # MHA + TP
    assert extract_prefix("short_key") == "short_key"  # '_' not at 64: whole key
    tagged = f"tag_llama_{blk}_0_k"
    assert extract_prefix(tagged) == tagged
    assert extract_prefix(tagged, r"_([0-9a-f]{64})(?:_|$)") == blk
    assert extract_prefix("no-hash-here", r"_([0-9a-f]{64})(?:_|$)") == "no-hash-here"


def test_object_and_node_share_a_slot() -> None:
    ks = KeySchema("mc", 64)
    blk = h("slot")
    shard = ks.shard_of(blk)
    slots = {
        key_slot(k.encode())
        for k in (
            ks.obj(shard, f"{blk}_0_k"),
            ks.node(shard, blk),
            ks.anchor(shard),
            ks.shard_key(shard, "leaves"),
            ks.obj(shard, "weird{key}with}braces"),
        )
    }
    assert len(slots) == 1
    assert len({ks.shard_tag(i) for i in range(64)}) == 64
    with pytest.raises(MooncakeError):
        ks.segment_tag("bad}id")


def test_shard_function_is_stable() -> None:
    # Recorded data depends on it: a change here would strand every stored node.
    assert KeySchema("mc", 64).shard_of("0" * 64) == KeySchema("other", 64).shard_of("0" * 64)
    assert [KeySchema("mc", 64).shard_of(h(i)) for i in range(5)] == [
        KeySchema("mc", 64).shard_of(h(i)) for i in range(5)
    ]


def test_every_script_has_a_header_and_shebang() -> None:
    scripts = load_all()
    assert scripts
    for name, script in scripts.items():
        assert script.shebang.startswith("#!lua"), name
        for section in ("KEYS", "ARGV", "Returns", "Errors"):
            assert section in script.header, f"{name} lacks {section}"
        assert "--!include" not in script.body, name
        assert not script.source(with_shebang=False).startswith("#!")


def test_scripts_go_to_redis_without_comment_lines() -> None:
    """Redis keeps each loaded script's source in its own memory (counted against maxmemory):
    the loader drops full-line comments and blank lines, which is safe only while no script
    holds a long string (``[[``) that such a line could belong to."""
    for name, script in load_all().items():
        lines = script.body.splitlines()
        assert all(line.strip() and not line.lstrip().startswith("--") for line in lines), name
        assert "[[" not in script.body, f"{name}: a long string; strip_comment_lines cannot tell"
    code = strip_comment_lines("-- a header\n\nlocal x = 1 -- kept: code before it\n  -- gone\n")
    assert code == "local x = 1 -- kept: code before it"


def test_scripts_go_to_redis_without_the_helpers_they_never_call() -> None:
    """A script's chunk runs whole on every call: each helper its includes define is a closure
    made per call, and so is each error code and field table. The loader drops those the script
    never names (a helper named only by another dropped one, or only by itself, goes too) and
    keeps every one it names."""
    src = "\n".join([
        "local function a(x)", "  return x", "end",
        "local function b(x) return a(x) end",
        "local function unused()", "  return 1", "end",
        "local function only_itself(n)", "  if n > 0 then return only_itself(n - 1) end", "end",
        "local function only_unused()", "  return 2", "end",
        "local function caller_gone()", "  return only_unused()", "end",
        "function K.tag(x) return x end",
        "function K.node(x) return x end",
        "local E = {}", "E.OK = 0", "E.GONE = -705",
        "local F = {}", "F.obj = { a = 'a' }", "F.node = { b = 'b' }",
        "return b(K.node(2)), E.OK, F.obj.a",
    ])  # fmt: skip
    assert drop_unused(src).splitlines() == [
        "local function a(x)", "  return x", "end",
        "local function b(x) return a(x) end",
        "function K.node(x) return x end",
        "local E = {}", "E.OK = 0",
        "local F = {}", "F.obj = { a = 'a' }",
        "return b(K.node(2)), E.OK, F.obj.a",
    ]  # fmt: skip
    with pytest.raises(LuaLoadError, match="not indented"):
        drop_unused("local function e()\nreturn 1\nend\nreturn e()")
    for name, script in load_all().items():
        assert drop_unused(script.body) == script.body, name
    exist = load_all()["exist"].body
    assert "local function store_grant_leases(" in exist and "store_erase" not in exist


def test_loader_rejects_cycles_and_missing_dedupes_repeats(tmp_path: Path) -> None:
    inc = tmp_path / "includes"
    inc.mkdir()
    (inc / "a.lua").write_text("--!include b.lua\n")
    (inc / "b.lua").write_text("--!include a.lua\n")
    (inc / "c.lua").write_text("local c = 1\n")
    with pytest.raises(LuaLoadError, match="cycle"):
        parse("s.lua", HDR + "--!include a.lua\n", inc)
    # An include reached twice (two includes declaring the same one) is expanded once.
    twice = parse("s.lua", HDR + "--!include c.lua\n--!include c.lua\nreturn c\n", inc)
    assert twice.body.count("local c = 1") == 1
    with pytest.raises(LuaLoadError, match="missing include"):
        parse("s.lua", HDR + "--!include nope.lua\n", inc)
    with pytest.raises(LuaLoadError, match="shebang"):
        parse("s.lua", "-- KEYS ARGV Returns\nreturn 1\n", inc)
    ok = parse("s.lua", HDR + "--!include c.lua\nreturn c\n", inc)
    assert "local c = 1" in ok.body and ok.flags == ("allow-oom",)


@pytest.mark.parametrize("pattern", [None, r"^p:([0-9a-f]{64})"])
def test_batch_shards_match_the_per_key_shard(pattern: str | None) -> None:
    """Context.shards_of_keys (the batch path: plain prefixes inline, misses hashed in one
    loop) gives every key the shard shard_of_key (prefix_of, then the hash) gives it."""
    from mooncake_redis.context import Context

    blk = h("s")
    keys = [blk, f"{blk}_0_k", f"{blk}x", "short", f"\0t1\0{blk}_1_v", "\0bad", f"p:{blk}_2",
            "_" * 64 + "_tail", f"{h('t')}_{blk}"]  # fmt: skip
    cfg = Config(num_shards=64, key_hash_pattern=pattern)
    batch, single = Context(None, cfg), Context(None, cfg)  # type: ignore[arg-type]
    expected = [single.shard_of_key(k) for k in keys]
    assert batch.shards_of_keys(keys) == expected
    assert batch.shards_of_keys(keys) == expected  # now from the memo
