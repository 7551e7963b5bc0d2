"""Small helpers shared by tests: block hashes, placing hashes in chosen shards."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

from blake3 import blake3

from mooncake_redis import MasterService


def h(name: str | int) -> str:
    """A 64-hex block hash, as SGLang/Mooncake would produce."""
    return blake3(str(name).encode()).hexdigest()


def hashes_in_shard(svc: MasterService, shard: int, tag: str = "") -> Iterator[str]:
    for i in count():
        cand = h(f"{tag}{shard}:{i}")
        if svc.keys.shard_of(cand) == shard:
            yield cand


def mha_keys(block: str, tp: int = 1) -> list[str]:
    return [f"{block}_{r}_{kv}" for r in range(tp) for kv in ("k", "v")]
