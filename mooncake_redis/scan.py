"""Walking every object or radix node of the namespace by SCAN.

The layout keeps no per-shard SET of object keys or node hashes (each cost about 90-130 B per
object): the keyspace itself is the index. The rare readers (fsck, inspect, the regex RPCs,
RemoveAll) walk each primary once with ``SCAN MATCH {<ns>:*}:o:*`` (or ``:n:``) and sort what
they find by shard; :meth:`KeySchema.parse` drops keys the glob over-matches. SCAN returns every
key present for the whole walk at least once (possibly twice: callers deduplicate).
"""

from __future__ import annotations

from typing import Any

from .backend import Backend
from .keys import KeySchema
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
    each once, in no particular order."""
    out: dict[int, set[str]] = {}
    for redis_key in await scan_match(backend, keys.scan_pattern(name)):
        parsed = keys.parse(redis_key, name)
        if parsed is not None:
            out.setdefault(parsed[0], set()).add(parsed[1])
    return {shard: sorted(ids) for shard, ids in out.items()}
