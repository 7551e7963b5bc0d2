#!lua flags=allow-cross-slot-keys,allow-oom
-- remove: Remove / BatchRemove (strict: one error code per key) and the per-key step of
-- RemoveByRegex / RemoveAll (skip: leased or incomplete objects are skipped, not errors).
-- An erased object leaves the indexes and the radix index; its buffers go to the outbox.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: mode ('strict' | 'skip'), force (0/1); then group count, then per group: anchor, shard index, n, n keys.
-- Returns: {{per key: {code, message}}, {continuation...}, {{shard, outbox entry}...}}.
-- Errors (per key, strict): OBJECT_NOT_FOUND (-704), OBJECT_HAS_LEASE (-706) unless force,
--   REPLICA_IS_NOT_READY (-703) if a replica is not COMPLETE (even with force).
--!include store.lua

local mode, force = arg(), argn()
local now = now_ms()
local out, conts, frees = {}, {}, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key = arg()
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.replicas, F.obj.lease_ms)
    if not f[1] then
      table.insert(out, { E.OBJECT_NOT_FOUND, 'key ' .. key .. ': object not found' })
    elseif force ~= 1 and (tonumber(f[2]) or 0) > now then
      table.insert(out, { E.OBJECT_HAS_LEASE, 'key ' .. key .. ': object has a lease' })
    elseif not store_all_complete(store_replicas(f[1])) then
      table.insert(out, { E.REPLICA_IS_NOT_READY, 'key ' .. key .. ': a replica is not COMPLETE' })
    else
      store_erase(tag, shard, key, conts, frees, nil)
      table.insert(out, { E.OK, '' })
    end
  end
end)
return { out, conts, frees }
