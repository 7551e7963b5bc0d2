"""Redis round trips per call, counted with a wrapper around the client's execute_command
(and the scripts' channel's, bench.common.CommandCounter).

``commands`` is every command sent; ``waves`` counts the sequential steps (a wave starts when a
command is sent while none is in flight), which is what a caller waits for. The figures are
printed (pytest -s) and bounded here; docs/store.md quotes them.
"""

from __future__ import annotations

from typing import Any

from mooncake_redis import MasterService
from mooncake_redis.bench.common import CommandCounter
from mooncake_redis.models import ReplicateConfig, Segment
from tests.helpers import h

C = "client-rt"


async def test_round_trips(make_service: Any, backend_url: str) -> None:
    svc: MasterService = await make_service(
        enable_radix_tree=True, num_shards=64, radix_put_guard=False
    )
    for i in range(3):
        await svc.mount_segment(Segment(f"s{i}", f"s{i}", (i + 1) << 40, 64 << 20), C)
    await svc.backend.load_scripts()  # EVALSHA hits, as on a warm worker
    cnt = CommandCounter(svc)
    await svc.allocator.segment_ids()  # warm the registry cache (refreshed every 0.5 s)
    rows: dict[str, tuple[int, int]] = {}
    rows["put_start"] = await cnt.measure(lambda: svc.put_start(C, "k1", [4096]))
    rows["put_start (radix parent)"] = await cnt.measure(
        lambda: svc.put_start(C, f"{h(2)}_0_k", [4096], ReplicateConfig(parent_block_hash=h(1)))
    )
    rows["put_end"] = await cnt.measure(lambda: svc.put_end(C, "k1"))
    rows["get_replica_list"] = await cnt.measure(lambda: svc.get_replica_list("k1"))
    rows["exist_key"] = await cnt.measure(lambda: svc.exist_key("k1"))
    rows["remove (force)"] = await cnt.measure(lambda: svc.remove("k1", force=True))
    keys = [f"{h(i)}_0_k" for i in range(100, 228)]
    await svc.allocator.segment_ids()
    rows["batch_put_start x128"] = await cnt.measure(
        lambda: svc.batch_put_start(C, keys, [[4096]] * 128)
    )
    rows["batch_put_end x128"] = await cnt.measure(lambda: svc.batch_put_end(C, keys))
    rows["batch_exist_key x128"] = await cnt.measure(lambda: svc.batch_exist_key(keys))
    rows["batch_get_replica_list x128"] = await cnt.measure(
        lambda: svc.batch_get_replica_list(keys)
    )
    rows["batch_remove x128 (force)"] = await cnt.measure(lambda: svc.batch_remove(keys, True))
    kind = backend_url.split(":")[0]
    for name, (commands, waves) in rows.items():
        print(f"{kind:16} {name:30} commands={commands:3} waves={waves}")
    nodes = 3 if "cluster" in kind else 1
    assert rows["put_start"][1] == 2 and rows["put_start"][0] == 2
    assert rows["put_start (radix parent)"][1] == 2
    assert rows["put_end"] == (1, 1)
    assert rows["get_replica_list"] == (1, 1)
    assert rows["batch_put_start x128"][1] == 2
    assert rows["batch_put_start x128"][0] <= 2 * nodes
    for name in ("batch_put_end x128", "batch_exist_key x128", "batch_get_replica_list x128"):
        assert rows[name][1] == 1 and rows[name][0] <= nodes, name
    assert rows["batch_remove x128 (force)"][1] <= 3
