#!lua flags=no-writes,allow-cross-slot-keys
-- evict_orphans: read step of the orphan phase of eviction: the first orphan roots of each
-- shard's orphans index (nodes whose parent block has no object; oldest mark first).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: limit per shard; then group count, then per group: anchor, shard index, 0.
-- Returns: per group: {hash, marked ms, hash, marked ms, ...}.
-- Errors: none.
--!include common.lua

local limit = argn()
local out = {}
each_group(function(tag, shard, n)
  table.insert(out, redis.call('ZRANGE', K.orphans(tag), 0, limit - 1, 'WITHSCORES'))
end)
return out
