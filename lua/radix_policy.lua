#!lua flags=allow-cross-slot-keys,allow-oom
-- radix_policy: records the leaf policy's tier protections in each shard's stats ('F/X/Y'
-- turnovers for tiered, '' for lru / lru-freq: the field is removed) and, when that changes
-- the shard's scoring, rescores its leaves index (once per change of policy: the scores are in
-- ms for lru and in logical blocks for tiered, and must not be mixed).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: offsets ('' = not tiered); then group count, then per group: anchor, shard
--       index, 0.
-- Returns: the number of leaves rescored.
-- Errors: none.
-- Idempotent: yes.
--!include radix.lua

local offsets = arg()
local rescored = 0
each_group(function(tag, shard, n)
  local cur = redis.call('HGET', K.stats(tag), F.stats.tier_offsets) or ''
  if cur == offsets then
    return
  end
  if offsets == '' then
    redis.call('HDEL', K.stats(tag), F.stats.tier_offsets)
  else
    redis.call('HSET', K.stats(tag), F.stats.tier_offsets, offsets)
  end
  radix_tier_cache[tag] = nil
  if (cur == '') == (offsets == '') then
    return -- tiered to tiered: scores already in blocks, the new protections apply from now on
  end
  for _, h in ipairs(redis.call('ZRANGE', K.leaves(tag), 0, -1)) do
    radix_zadd_leaf(tag, h, true)
    rescored = rescored + 1
  end
end)
return rescored
