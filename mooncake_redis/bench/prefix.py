"""Prefix query: get_keys_by_prefix against the SCAN a user needs without the index."""

from __future__ import annotations

import random
from functools import partial
from typing import Any

from ..keys import glob_escape
from .common import (
    BenchFailure,
    drop_namespace,
    fresh_service,
    mount,
    populate,
    scan_namespace,
    summary_ms,
    timed,
)


async def scan_for_prefix(svc: Any, prefix: str) -> list[bytes]:
    """Without the index: SCAN the whole namespace for the prefix's object hashes: ``:o:``
    hashes and the block hashes ``:n:`` of 64-byte keys (schema 6, keys.KeySchema.obj). A
    block hash holding only a node matches too; the bench's MLA blocks all hold their object."""
    ns = glob_escape(svc.config.namespace)
    return await scan_namespace(svc, "{" + ns + ":*}:[on]:" + glob_escape(prefix) + "*", 1000)


async def bench_prefix(
    url: str,
    sizes: tuple[int, ...],
    queries: int = 2000,
    scan_queries: int = 5,
    num_shards: int = 0,
) -> dict[str, Any]:
    """Every size stored at once (a namespace each), then the timed queries interleaved, one
    per size in turn: a machine whose speed drifts over the minutes a large store takes to
    build moves every size's samples alike, so the p50 ratio compares the sizes, not the
    moments they were measured at."""
    out: dict[str, Any] = {}
    rng = random.Random(7)
    services: dict[int, Any] = {}
    probes: dict[int, list[str]] = {}
    try:
        for n in sizes:
            svc = await fresh_service(url, enable_radix_tree=True, num_shards=num_shards)
            services[n] = svc
            out["num_shards"] = svc.config.num_shards
            await mount(svc, n * 4096 * 2)
            hashes = await populate(svc, n, salt=f"p{n}")
            probes[n] = [rng.choice(hashes) for _ in range(queries)]
            for hsh in probes[n]:  # warms the pool and script cache; every probe finds its block
                if not (await svc.get_keys_by_prefix(hsh)).keys:
                    raise BenchFailure(f"get_keys_by_prefix({hsh}): no keys for a stored block")
        index: dict[int, list[float]] = {n: [] for n in sizes}
        for i in range(queries):
            for n in sizes:
                index[n].append(await timed(partial(services[n].get_keys_by_prefix, probes[n][i])))
        for n in sizes:
            svc, probe = services[n], probes[n]
            node = await svc.get_keys_by_prefix(probe[0])
            scan_found = await scan_for_prefix(svc, probe[0])
            if not node.keys or len(scan_found) != len(node.keys):
                raise BenchFailure("SCAN and the index disagree")
            scan = [await timed(partial(scan_for_prefix, svc, hsh)) for hsh in probe[:scan_queries]]
            out[str(n)] = {"index": summary_ms(index[n]), "scan": summary_ms(scan)}
    finally:
        for svc in services.values():
            await drop_namespace(svc)
            await svc.aclose()
    if len(sizes) >= 2:
        small, large = out[str(sizes[0])], out[str(sizes[-1])]
        out["p50_ratio_large_vs_small"] = large["index"]["p50_ms"] / small["index"]["p50_ms"]
        out["scan_vs_index_p50_at_largest"] = large["scan"]["p50_ms"] / large["index"]["p50_ms"]
    return out
