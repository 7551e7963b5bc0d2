"""Redis bytes per stored object, with its radix node and indexes (INFO memory delta)."""

from __future__ import annotations

import asyncio
from typing import Any

from .common import drop_namespace, fresh_service, mount, populate


async def used_memory(svc: Any) -> int:
    client = svc.backend.client
    if svc.backend.cluster:
        total = 0
        for node in client.get_primaries():
            info = await client.info("memory", target_nodes=node)
            if isinstance(info, dict) and node.name in info:
                info = info[node.name]
            total += int(info["used_memory"])
        return total
    return int((await client.info("memory"))["used_memory"])


async def bench_memory(
    url: str, objects: int = 100_000, tp: int = 4, num_shards: int = 0
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key_format in ("mla", "mha"):
        per_block = 1 if key_format == "mla" else 2 * tp
        blocks = objects // per_block
        svc = await fresh_service(url, enable_radix_tree=True, num_shards=num_shards)
        out["num_shards"] = svc.config.num_shards
        try:
            await mount(svc, blocks * per_block * 4096 * 2)
            await asyncio.sleep(0.2)
            before = await used_memory(svc)
            await populate(svc, blocks, key_format=key_format, tp=tp, salt=f"m{key_format}")
            after = await used_memory(svc)
            stored = blocks * per_block
            counted = (await svc.shard_totals("objects"))["objects"]
            if counted != stored:  # measure only a store that holds what was put
                raise RuntimeError(f"memory bench: {counted} objects stored, {stored} put")
            out[key_format] = {
                "objects": stored,
                "blocks": blocks,
                "bytes": after - before,
                "bytes_per_object": (after - before) / stored,
                "bytes_per_block": (after - before) / blocks,
            }
        finally:
            await drop_namespace(svc)
            await svc.aclose()
    return out
