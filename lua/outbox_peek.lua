#!lua flags=no-writes,allow-cross-slot-keys
-- outbox_peek: the first entries of shards' outboxes (a drain reads, frees in the segments with
-- alloc_free, then acknowledges with outbox_ack).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: limit per shard; then group count, then per group: anchor, shard index, 0.
-- Returns: per group: {entry "segment id|offset|put id", ...}.
-- Errors: none.
--!include common.lua

local limit = argn()
local out = {}
each_group(function(tag, shard, n)
  table.insert(out, redis.call('LRANGE', K.outbox(tag), 0, limit - 1))
end)
return out
