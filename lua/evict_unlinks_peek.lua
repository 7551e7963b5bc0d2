#!lua flags=no-writes,allow-cross-slot-keys
-- evict_unlinks_peek: the first journaled unlink continuations of eviction in each shard (a
-- successor finishes the cascade of an evictor that died between its steps).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: limit per shard; then group count, then per group: anchor, shard index, 0.
-- Returns: per group: {journal entry (cjson {parent, parent shard, child, gen})...}.
-- Errors: none.
--!include common.lua

local limit = argn()
local out = {}
each_group(function(tag, shard, n)
  table.insert(out, redis.call('LRANGE', K.unlinks(tag), 0, limit - 1))
end)
return out
