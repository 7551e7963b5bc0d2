"""Walking every object or radix node of the namespace by SCAN.

The layout keeps no per-shard SET of object keys or node hashes (each cost about 90-130 B per
object): the keyspace itself is the index. The rare readers (fsck, inspect, the regex RPCs,
RemoveAll) walk each primary once with ``SCAN MATCH {<ns>:*}:[on]:*`` (or ``:n:``) and sort what
they find by shard; :meth:`KeySchema.parse` drops keys the glob over-matches. SCAN returns every
key present for the whole walk at least once (possibly twice: callers deduplicate).
"""

from __future__ import annotations

from typing import Any

from .backend import Backend
from .keys import HASH_FIELDS, KeySchema, is_block_key
from .records import _s


async def scan_match(backend: Backend, pattern: str, count: int = 1000) -> list[str]:
    """Every key matching ``pattern`` on every primary (one SCAN walk per node)."""
    client = backend.client
    nodes: list[Any] = client.get_primaries() if backend.cluster else [None]
    found: list[str] = []
    for node in nodes:
        cursor: Any = 0
        while True:
            cursor, keys = await backend.command(
                "SCAN", cursor, "MATCH", pattern, "COUNT", count, node=node
            )
            if isinstance(cursor, dict):  # redis-py's cluster SCAN: ({node name: cursor}, keys)
                cursor = next(iter(cursor.values()))
            found.extend(_s(k) for k in keys)
            if int(cursor) == 0:
                break
    return found


async def shard_ids(backend: Backend, keys: KeySchema, name: str) -> dict[int, list[str]]:
    """Shard -> the ids (object keys for ``obj``, prefix hashes for ``node``) stored in it,
    each once, in no particular order. A block hash is an object only while it holds one (a
    block key's object shares it with the node) and a node only while it has a node field:
    those are checked in one pipeline."""
    out: dict[int, set[str]] = {}
    blocks: list[tuple[str, int, str]] = []
    for redis_key in await scan_match(backend, keys.scan_pattern(name)):
        parsed = keys.parse(redis_key, name)
        if parsed is None:
            continue
        if is_block_key(parsed[1]) and keys.node(*parsed) == redis_key:
            blocks.append((redis_key, *parsed))
        else:
            out.setdefault(parsed[0], set()).add(parsed[1])
    field = HASH_FIELDS["obj"]["put_id"] if name == "obj" else HASH_FIELDS["node"]["created_ms"]
    for start in range(0, len(blocks), 1000):
        part = blocks[start : start + 1000]
        pipe = backend.client.pipeline(transaction=False)
        for redis_key, _, _ in part:
            pipe.hget(redis_key, field)  # not HEXISTS: redis-py's cluster pipeline fails on it
        for (_, shard, ident), present in zip(part, await pipe.execute()):
            if present is not None:
                out.setdefault(shard, set()).add(ident)
    return {shard: sorted(ids) for shard, ids in out.items()}
