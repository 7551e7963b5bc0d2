#!lua flags=no-writes,allow-cross-slot-keys
-- evict_counts: per shard, the object count (BatchEvict's ratios are fractions of it) and how
-- many objects in the lru index have an expired lease.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, 0.
-- Returns: {now ms, per group: {objects, expired lru entries}}.
-- Errors: none.
--!include common.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  local objects = tonumber(redis.call('HGET', K.stats(tag), F.stats.objects)) or 0
  table.insert(out, { objects, redis.call('ZCOUNT', K.lru(tag), '-inf', now) })
end)
return { now, out }
