#!lua flags=no-writes,allow-cross-slot-keys
-- owner_check: janitor check of a pending allocation: does its owner object reference it (same
-- put id, same segment and offset), or is its free already scheduled (discarded set or outbox
-- entry)? Then it is confirmed; otherwise, past the reclaim grace, it is a leak to free.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n items (key, segment id,
--       offset (u64 hex), put id).
-- Returns: per item 1 (referenced or scheduled) or 0.
-- Errors: none.
--!include store.lua

local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key, seg, off, pid = arg(), arg(), arg(), arg()
    local hit = 0
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.replicas, F.obj.put_id)
    if f[2] == pid then
      for _, rep in ipairs(store_replicas(f[1])) do
        if rep.seg == seg and rep.off == off then
          hit = 1
        end
      end
    end
    if hit == 0 then
      local e = seg .. '|' .. off .. '|' .. pid
      if redis.call('ZSCORE', K.discarded(tag), e) then
        hit = 1
      end
    end
    table.insert(out, hit)
  end
end)
return out
