#!lua flags=allow-cross-slot-keys,allow-oom
-- put_end: PutEnd: marks the object's replicas COMPLETE; an object of no radix tree (not
-- hard pinned) enters the lru index with a lease of 0 ms (lease timeout = max(lease timeout,
-- now)); a registered one is ordered by its leaf. allow-oom: a put that got its
-- buffers completes even when Redis filled up meanwhile (it rewrites fields of an existing key
-- and adds one index entry). Per item one HMGET and one HSET; per shard one ZREM processing and
-- one ZADD lru.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (key, client id).
-- Returns: per item 0 (OK), or {code, message} (a success is no table: Redis probes every table of
--          a reply for seven special fields before it sends it as an array).
-- Errors (per item): OBJECT_NOT_FOUND (-704), ILLEGAL_CLIENT (-601).
-- Idempotent: yes.
--!include store.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  local done, lru = {}, {}
  for _ = 1, n do
    local key, client = arg(), arg()
    local okey = K.obj(tag, key)
    local f = redis.call('HMGET', okey, F.obj.client, F.obj.replicas, F.obj.hard_pin, F.obj.lease_ms, F.obj.radix)
    if not f[1] then
      table.insert(out, { E.OBJECT_NOT_FOUND, 'key ' .. key .. ': object not found' })
    elseif f[1] ~= store_client_known(tag, client) then
      table.insert(out, { E.ILLEGAL_CLIENT, 'client_id: key ' .. key .. ' was started by another client' })
    else
      -- a string: a Lua number in a call costs Redis a %.17g snprintf (memoized: mostly now)
      local lease = store_ms(math.max(tonumber(f[4]) or 0, now))
      redis.call('HSET', okey, F.obj.status, 'C', F.obj.lease_ms, lease, F.obj.replicas, store_complete(f[2]))
      table.insert(done, key)
      if f[3] ~= '1' and not f[5] then -- a radix-registered object (rad '1' or '2') is evicted by its leaf
        table.insert(lru, lease)
        table.insert(lru, key)
      end
      out[#out + 1] = E.OK
    end
  end
  zrem_sorted(K.processing(tag), done)
  variadic('ZADD', K.lru(tag), lru)
end)
return out
