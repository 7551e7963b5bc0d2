#!lua flags=allow-cross-slot-keys,allow-oom
-- get_replicas: GetReplicaList: the COMPLETE replicas of each key, granting a lease:
-- lease timeout = max(lease timeout, now + ttl); soft pin refreshed the same way; the lru index
-- and the radix leaf score follow. allow-oom: a read must work when Redis is full (it only
-- rewrites fields of existing keys).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: lease ttl ms, soft pin ttl ms; then group count, then per group: anchor, shard index, n, n keys.
-- Returns: per key {code, message, replicas cjson (store_json), lease timeout ms}.
-- Errors (per key): OBJECT_NOT_FOUND (-704), REPLICA_IS_NOT_READY (-703) without a COMPLETE replica.
-- Idempotent: yes (a lease grant is a max).
--!include store.lua

local ttl, soft_ttl = argn(), argn()
local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key = arg()
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.replicas, F.obj.lease_ms, F.obj.soft_pin_ms, F.obj.hard_pin, F.obj.radix, F.obj.prefix)
    if not f[1] then
      table.insert(out, { E.OBJECT_NOT_FOUND, 'key ' .. key .. ': object not found' })
    elseif not store_any_complete(store_replicas(f[1])) then
      table.insert(out, { E.REPLICA_IS_NOT_READY, 'key ' .. key .. ': no COMPLETE replica' })
    else
      local lease = store_grant_lease(tag, key, { f[2], f[3], f[4], f[5], f[6] }, now, ttl, soft_ttl)
      table.insert(out, { E.OK, '', store_json(store_replicas(f[1])), lease })
    end
  end
end)
return out
