#!lua flags=no-writes,allow-cross-slot-keys
-- objects_complete: the keys of every COMPLETE object of the given shards, read in one atomic
-- step per node (a consistent snapshot on a single Redis, even while an evictor runs), without
-- granting a lease or touching recency. For replay health samples and tools.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, 0.
-- Returns: per group, in ARGV order, the list of its complete object keys.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local out = {}
each_group(function(tag, _, _)
  local keys = {}
  for _, key in ipairs(redis.call('SMEMBERS', K.objects(tag))) do
    if redis.call('HGET', K.obj(tag, key), 'st') == 'C' then
      table.insert(keys, key)
    end
  end
  table.insert(out, keys)
end)
return out
