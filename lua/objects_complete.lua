#!lua flags=no-writes,allow-cross-slot-keys
-- objects_complete: every COMPLETE object of the given shards with its put id, read in one atomic
-- step per node (a consistent snapshot on a single Redis, even while an evictor runs), without
-- granting a lease or touching recency. For replay health samples and tools.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, 0.
-- Returns: per group, in ARGV order, a flat list: key, put id, key, put id, ...
-- Errors: none.
--!include common.lua

local out = {}
each_group(function(tag, _, _)
  local keys = {}
  for _, key in ipairs(redis.call('SMEMBERS', K.objects(tag))) do
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.status, F.obj.put_id)
    if f[1] == 'C' then
      table.insert(keys, key)
      table.insert(keys, f[2] or '')
    end
  end
  table.insert(out, keys)
end)
return out
