"""Small helpers shared by tests: block hashes, placing hashes in chosen shards, the script
calls a service makes."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from typing import Any, NamedTuple

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


class ScriptCall(NamedTuple):
    name: str
    keys: list[str]
    args: list[Any]


def record_calls(svc: MasterService) -> list[ScriptCall]:
    """From now on, every script call ``svc`` makes is appended to the returned list."""
    calls: list[ScriptCall] = []
    real = svc.backend.call

    async def call(name: str, keys: Any, args: Any, node: Any = None) -> Any:
        calls.append(ScriptCall(name, list(keys), list(args)))
        return await real(name, keys, args, node)

    svc.backend.call = call  # type: ignore[method-assign]
    return calls
