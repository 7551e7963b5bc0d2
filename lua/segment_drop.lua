#!lua flags=allow-cross-slot-keys,allow-oom
-- segment_drop: middle step of UnmountSegment (and of client expiry): for each alloc record of
-- the unmounting segment, drops the replica it backs from the owner object (an object left
-- without a replica is erased and unregistered from the radix index). A record whose owner does
-- not reference it (a put between reserve and commit) is vetoed: put_start refuses to commit it.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n items (key, segment id,
--       offset (u64 hex), put id).
-- Returns: {replicas dropped, objects erased, {continuation...}, {{shard, outbox entry}...}}.
-- Errors: none.
--!include store.lua

local now = now_ms()
local dropped, erased, conts, frees = 0, 0, {}, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key, seg, off, pid = arg(), arg(), arg(), arg()
    local okey = K.obj(tag, key)
    local f = redis.call('HMGET', okey, F.obj.replicas, F.obj.put_id)
    local keep, hit = {}, false
    if f[2] == pid then
      for _, rep in ipairs(store_replicas(f[1])) do
        if rep.seg == seg and rep.off == off then
          hit = true
        else
          table.insert(keep, rep)
        end
      end
    end
    if not hit then
      redis.call('ZADD', K.veto(tag), now, seg .. '|' .. off .. '|' .. pid)
    else
      dropped = dropped + 1
      if #keep == 0 then
        redis.call('HSET', okey, F.obj.replicas, '')
        store_erase(tag, shard, key, conts, frees, nil)
        erased = erased + 1
      else
        redis.call('HSET', okey, F.obj.replicas, store_encode(keep))
        if not store_any_complete(keep) then
          redis.call('HSET', okey, F.obj.status, 'P')
        end
      end
    end
  end
end)
return { dropped, erased, conts, frees }
