"""Every Redis key name of the system, and nothing else formats one.

Three kinds of hash tag:
- shard tag ``{<ns>:<i>}``: objects, radix nodes and the per-shard indexes of shard i;
- segment tag ``{<ns>:s:<segment_id>}``: one mounted segment's allocator;
- global tag ``{<ns>:g}``: recorded config, clients, segment registry, evictor lease.

The shard of an object is the shard of its prefix hash, so an object and its radix node share a
slot. Lua scripts derive keys from a shard's anchor key (``<tag>:stats``) with the functions that
:func:`lua_key_functions` generates from the suffixes below, so the names live only here.
"""

from __future__ import annotations

from blake3 import blake3

from .errors import ErrorCode, MooncakeError

# Suffixes inside a shard tag (see docs/architecture.md for types and fields).
SHARD_SUFFIXES: dict[str, str] = {
    "stats": ":stats",  # HASH   per-shard counters; also the shard's anchor key in KEYS
    "obj": ":o:",  # HASH   object metadata, one per object key
    "node": ":n:",  # HASH   radix node {p parent, g link gen, t created, s score, h hits}
    "node_keys": ":nk:",  # SET    keys registered under a node
    "node_children": ":nc:",  # ZSET   child hash -> link generation (ms)
    "nodes": ":nodes",  # SET    every node hash of the shard
    "objects": ":objects",  # SET    every object key of the shard
    "leaves": ":leaves",  # ZSET   evictable-leaf index: node hash -> policy score
    "orphans": ":orphans",  # ZSET   orphan roots (parent block has no object) -> marked ms
    "lru": ":lru",  # ZSET   complete, not hard-pinned objects -> lease timeout (ms)
    "processing": ":proc",  # ZSET   objects with a PROCESSING put -> put start (ms)
    "outbox": ":outbox",  # LIST   pending buffer frees for segment allocators
    "seq": ":seq",  # STRING replica id counter
    "discarded": ":discarded",  # ZSET   stale-put buffer frees "seg|off|put id" -> release ms
    "veto": ":veto",  # ZSET   allocations an unmount dropped before commit -> ms
    "unlinks": ":unlinks",  # LIST   eviction's cross-shard unlink steps not yet done (cjson)
}
SEGMENT_SUFFIXES: dict[str, str] = {
    "info": ":info",  # HASH   name, base, size, te_endpoint, protocol, client_id, allocated
    "free_off": ":free_off",  # ZSET   free extent offset -> offset
    "free_len": ":free_len",  # ZSET   free extent offset -> length
    "alloc": ":alloc",  # HASH   offset -> "len|put id|alloc ms|owner key" (owner last: may hold |)
    "pending": ":pending",  # ZSET   offset -> alloc ms, allocations not yet confirmed
}
GLOBAL_SUFFIXES: dict[str, str] = {
    "meta": ":meta",  # HASH   schema_version, num_shards, radix, created_ms
    "clients": ":clients",  # ZSET   client id -> last ping (ms)
    "expiring": ":expiring",  # ZSET   clients the janitor is expiring -> claim ms
    "heartbeat": ":heartbeat",  # HASH   heard (last hearing tick ms), since (its run began)
    "segments": ":segments",  # HASH   segment id -> client id
    "evictor": ":evictor",  # HASH   holder, epoch, expires_ms
    "evict_needed": ":evict_needed",  # STRING durable "an allocation failed" flag
    "janitor": ":janitor",  # STRING time of the last janitor run
    "te_metadata": ":te_metadata",  # HASH   transfer-engine metadata (/metadata) key -> value
    "parent_hint": ":ph:",  # STRING wire front end: a block's inferred parent block (PX ttl)
}


def shard_hash(value: str) -> int:
    """Stable 64-bit hash of a prefix; the same on every worker and every Python version."""
    return int.from_bytes(blake3(value.encode("utf-8", "surrogatepass")).digest(8), "big")


class KeySchema:
    def __init__(self, namespace: str, num_shards: int) -> None:
        self.ns = namespace
        self.num_shards = num_shards
        self.global_tag = "{" + namespace + ":g}"

    # -- shards ---------------------------------------------------------------------------
    def shard_of(self, prefix_hash: str) -> int:
        return shard_hash(prefix_hash) % self.num_shards

    def shard_tag(self, shard: int) -> str:
        return "{" + f"{self.ns}:{shard}" + "}"

    def anchor(self, shard: int) -> str:
        """The key passed in KEYS for a shard; scripts derive the shard's other keys from it."""
        return self.shard_tag(shard) + SHARD_SUFFIXES["stats"]

    def obj(self, shard: int, key: str) -> str:
        return self.shard_tag(shard) + SHARD_SUFFIXES["obj"] + key

    def node(self, shard: int, prefix_hash: str) -> str:
        return self.shard_tag(shard) + SHARD_SUFFIXES["node"] + prefix_hash

    def node_keys(self, shard: int, prefix_hash: str) -> str:
        return self.shard_tag(shard) + SHARD_SUFFIXES["node_keys"] + prefix_hash

    def node_children(self, shard: int, prefix_hash: str) -> str:
        return self.shard_tag(shard) + SHARD_SUFFIXES["node_children"] + prefix_hash

    def shard_key(self, shard: int, name: str) -> str:
        """Per-shard singleton keys: stats, nodes, objects, leaves, lru, processing, outbox, seq."""
        return self.shard_tag(shard) + SHARD_SUFFIXES[name]

    def all_anchors(self) -> list[str]:
        return [self.anchor(i) for i in range(self.num_shards)]

    # -- segments -------------------------------------------------------------------------
    def segment_tag(self, segment_id: str) -> str:
        if not segment_id or "{" in segment_id or "}" in segment_id or len(segment_id) > 256:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, "segment id: 1-256 characters without braces"
            )
        return "{" + f"{self.ns}:s:{segment_id}" + "}"

    def segment_anchor(self, segment_id: str) -> str:
        return self.segment_tag(segment_id) + SEGMENT_SUFFIXES["info"]

    def segment_key(self, segment_id: str, name: str) -> str:
        return self.segment_tag(segment_id) + SEGMENT_SUFFIXES[name]

    # -- global ---------------------------------------------------------------------------
    def global_key(self, name: str) -> str:
        return self.global_tag + GLOBAL_SUFFIXES[name]

    def parent_hint(self, prefix_hash: str) -> str:
        """One block's inferred parent (wire front end): all hints share the global tag, so
        one script call writes an exists call's hints."""
        return self.global_tag + GLOBAL_SUFFIXES["parent_hint"] + prefix_hash


def lua_key_functions() -> str:
    """Lua source of the key-name helpers, generated from the suffix tables above.

    Scripts receive anchors (``<tag>:stats`` or ``<segtag>:info``) in KEYS and call
    ``K.tag(anchor)`` then e.g. ``K.obj(tag, key)``; every derived key shares the anchor's slot.
    """
    lines = ["local K = {}"]
    lines.append(
        "function K.tag(anchor) return string.sub(anchor, 1, string.find(anchor, '}', 1, true)) end"
    )
    # Shard tags are {<ns>:<index>} (the namespace holds no ':' or '}'): a sibling shard's tag.
    lines.append(
        "function K.shard(tag, shard) return string.sub(tag, 1, string.find(tag, ':', 1, true))"
        " .. shard .. '}' end"
    )
    for name, suffix in {**SHARD_SUFFIXES, **SEGMENT_SUFFIXES}.items():
        if suffix.endswith(":"):
            lines.append(f"function K.{name}(tag, id) return tag .. '{suffix}' .. id end")
        else:
            lines.append(f"function K.{name}(tag) return tag .. '{suffix}' end")
    for name, suffix in GLOBAL_SUFFIXES.items():
        if suffix.endswith(":"):
            lines.append(f"function K.g_{name}(gtag, id) return gtag .. '{suffix}' .. id end")
        else:
            lines.append(f"function K.g_{name}(gtag) return gtag .. '{suffix}' end")
    return "\n".join(lines) + "\n"
