"""``mooncake-redis inspect`` and ``fsck`` against a real Redis: JSON for scripts, readable
output, options from MOONCAKE_REDIS_* variables, fsck exit status (0 only when clean)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.cli import main
from tests.conftest import _cleanup
from tests.helpers import h


@pytest.fixture
def ns(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    namespace = "c" + uuid.uuid4().hex[:10]
    monkeypatch.setenv("MOONCAKE_REDIS_REDIS_URL", redis_url)  # options from the environment
    monkeypatch.setenv("MOONCAKE_REDIS_NAMESPACE", namespace)
    monkeypatch.setenv("MOONCAKE_REDIS_NUM_SHARDS", "8")
    monkeypatch.setenv("MOONCAKE_REDIS_ENABLE_RADIX_TREE", "1")
    yield namespace
    _cleanup(redis_url, namespace)


A, B, C = h("A"), h("B"), h("C")


def populate(redis_url: str, namespace: str) -> None:
    async def go() -> None:
        cfg = Config(redis_url=redis_url, namespace=namespace, num_shards=8, enable_radix_tree=True)
        async with await MasterService.from_url(redis_url, cfg) as svc:
            await svc.mount_segment({"id": "s0", "size": 1 << 16}, "cl")
            await svc.put_start("cl", A + "_0_k", 100)
            await svc.put_end("cl", A + "_0_k")
            await svc.put_start("cl", B + "_0_k", 100, {"parent_block_hash": A})
            await svc.put_end("cl", B + "_0_k")
            await svc.register_radix_tree_node(C, B, [C + "_0_v"])

    asyncio.run(go())


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_inspect_json(redis_url: str, ns: str, capsys: pytest.CaptureFixture[str]) -> None:
    populate(redis_url, ns)
    code, node = run_json(capsys, "inspect", "--json", "node", B)
    assert code == 0 and isinstance(node, dict)
    assert node["parent_prefix_hash"] == A and node["keys"] == [B + "_0_k"]
    assert list(node["children"]) == [C] and isinstance(node["shard"], int)
    tag = node["tag"]
    assert node["redis_keys"] == {"node": f"{tag}:n:{B}"}
    assert node["redis_cli"] == [f"HGETALL '{tag}:n:{B}'"]
    code, key = run_json(capsys, "inspect", "--json", "key", A + "_0_k")
    assert code == 0 and isinstance(key, dict)
    assert key["exists"] and key["prefix_hash"] == A and key["registered_in_node"]
    assert key["replicas"][0]["len"] == 100
    code, tree = run_json(capsys, "inspect", "--json", "tree", A, "--depth", "5")
    assert code == 0 and isinstance(tree, dict)
    assert {n["prefix_hash"] for n in tree["nodes"]} == {A, B, C}
    assert sorted(tree["keys"]) == sorted([A + "_0_k", B + "_0_k", C + "_0_v"])
    code, tree1 = run_json(capsys, "inspect", "--json", "tree", A, "--depth", "1")
    assert isinstance(tree1, dict) and tree1["truncated"] is True
    code, stats = run_json(capsys, "inspect", "--json", "stats")
    assert code == 0 and isinstance(stats, dict)
    assert stats["totals"]["nodes"] == 3 and stats["totals"]["objects"] == 2
    assert stats["segments"][0]["id"] == "s0" and stats["namespace"] == ns
    # Missing things: exit 1.
    assert main(["inspect", "--json", "node", h("none")]) == 1
    capsys.readouterr()


def test_inspect_readable(redis_url: str, ns: str, capsys: pytest.CaptureFixture[str]) -> None:
    populate(redis_url, ns)
    assert main(["inspect", "tree", A]) == 0
    out = capsys.readouterr().out
    assert A[:12] in out and B[:12] in out and C[:12] in out and "3 nodes" in out
    assert main(["inspect", "node", A]) == 0
    out = capsys.readouterr().out
    assert "shard" in out and "redis-cli HGETALL '" in out
    assert main(["inspect", "stats"]) == 0
    assert "totals" in capsys.readouterr().out


def test_fsck_exit_status(redis_url: str, ns: str, capsys: pytest.CaptureFixture[str]) -> None:
    populate(redis_url, ns)
    code, report = run_json(capsys, "fsck", "--json")
    assert code == 0 and isinstance(report, dict) and report["clean"]
    # A dangling edge: B lists a child that does not exist.
    import redis

    r = redis.Redis.from_url(redis_url)
    cfg = Config(namespace=ns, num_shards=8)
    from mooncake_redis.keys import HASH_FIELDS, KeySchema, node_child_field

    keys = KeySchema(cfg.namespace, cfg.num_shards)
    r.hset(keys.node(keys.shard_of(B), B), node_child_field(h("ghost")), 1)
    r.hincrby(keys.node(keys.shard_of(B), B), HASH_FIELDS["node"]["nchildren"], 1)
    code, report = run_json(capsys, "fsck", "--json")
    assert code == 1 and isinstance(report, dict) and report["kinds"] == {"dangling_edge": 1}
    assert main(["fsck"]) == 1
    assert "not clean" in capsys.readouterr().out
    code, report = run_json(capsys, "fsck", "--json", "--repair", "--grace-ms", "0")
    assert code == 0 and isinstance(report, dict) and report["clean"]
    assert main(["fsck"]) == 0
    capsys.readouterr()
    r.close()


def test_unreachable_redis_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.servers import free_port

    url = f"redis://user:hunter2@127.0.0.1:{free_port()}"
    assert main(["fsck", "--redis-url", url]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err
