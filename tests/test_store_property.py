"""Property: random mount / put / end / revoke / remove / unmount / janitor sequences never
produce overlapping allocations and always leave fsck clean (invariants 3 and 4, and the radix
invariants through inline registration), on all three backends."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_redis import Config, MasterService, MooncakeError
from mooncake_redis.fsck import fsck
from mooncake_redis.models import ReplicateConfig, Segment
from tests.conftest import _cleanup
from tests.helpers import h

BLOCKS = [h(f"prop{i}") for i in range(6)]
KEYS = [f"{b}_0_k" for b in BLOCKS] + [f"{BLOCKS[0]}_1_k", "plain-key"]

op = st.one_of(
    st.tuples(st.just("mount"), st.integers(0, 2)),
    st.tuples(st.just("unmount"), st.integers(0, 2)),
    st.tuples(
        st.just("put"),
        st.integers(0, len(KEYS) - 1),
        st.integers(1, 5000),
        st.integers(1, 3),
        st.integers(-1, len(BLOCKS) - 1),
    ),
    st.tuples(st.just("end"), st.integers(0, len(KEYS) - 1)),
    st.tuples(st.just("revoke"), st.integers(0, len(KEYS) - 1)),
    st.tuples(st.just("remove"), st.integers(0, len(KEYS) - 1), st.booleans()),
    st.tuples(st.just("get"), st.integers(0, len(KEYS) - 1)),
    st.tuples(st.just("batch"), st.integers(0, 2)),
    st.tuples(st.just("janitor"), st.just(0)),
    st.tuples(st.just("sleep"), st.just(0)),
)


async def run_ops(url: str, ops: list[tuple[Any, ...]]) -> None:
    ns = "p" + uuid.uuid4().hex[:12]
    cfg = Config(
        namespace=ns,
        num_shards=4,
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=20,
        put_start_discard_timeout_ms=30,
        put_start_release_timeout_ms=60,
    )
    svc = await MasterService.from_url(url, cfg)
    try:
        for o in ops:
            kind = o[0]
            try:
                if kind == "mount":
                    await svc.mount_segment(Segment(f"s{o[1]}", "s", 1 << 30, 16_384), "c")
                elif kind == "unmount":
                    await svc.unmount_segment(f"s{o[1]}", "c")
                elif kind == "put":
                    _, k, size, n, parent = o
                    par = BLOCKS[parent] if parent >= 0 else ""
                    await svc.put_start(
                        "c", KEYS[k], [size], ReplicateConfig(replica_num=n, parent_block_hash=par)
                    )
                elif kind == "end":
                    await svc.put_end("c", KEYS[o[1]])
                elif kind == "revoke":
                    await svc.put_revoke("c", KEYS[o[1]])
                elif kind == "remove":
                    await svc.remove(KEYS[o[1]], force=o[2])
                elif kind == "get":
                    await svc.get_replica_list(KEYS[o[1]])
                elif kind == "batch":
                    ks = KEYS[o[1] :: 3]
                    await svc.batch_put_start("c", ks, [[700]] * len(ks))
                    await svc.batch_put_end("c", ks)
                elif kind == "sleep":
                    await asyncio.sleep(0.04)
                elif kind == "janitor":
                    await svc.run_janitor_once(force=True)
            except MooncakeError:
                pass
            report = await fsck(svc)
            assert report.clean, (o, report.to_dict()["problems"])
    finally:
        await svc.aclose()
        _cleanup(url, ns)


@settings(
    max_examples=int(os.environ.get("STORE_PROPERTY_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(op, min_size=1, max_size=25))
async def test_random_sequences_keep_fsck_clean(
    backend_url: str, ops: list[tuple[Any, ...]]
) -> None:
    await run_ops(backend_url, [("mount", 0), ("mount", 1), *ops])
