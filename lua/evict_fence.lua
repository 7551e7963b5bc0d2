#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_fence: a new evictor epoch raises every shard's fence before it acts, so that from then
-- on no script of an older epoch writes anywhere (not even on a node whose clock lags).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: epoch; then group count, then per group: anchor, shard index, 0.
-- Returns: the number of shards whose fence was raised.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local epoch = argn()
local raised = 0
each_group(function(tag, shard, n)
  local f = tonumber(redis.call('HGET', K.stats(tag), F.stats.fence)) or 0
  if epoch > f then
    redis.call('HSET', K.stats(tag), F.stats.fence, epoch)
    raised = raised + 1
  end
end)
return raised
