#!lua flags=allow-cross-slot-keys,allow-oom
-- janitor_shard: per-shard janitor step: discards stale PROCESSING puts (put start + discard
-- timeout passed, no COMPLETE replica: erased, unregistered, buffers to the discarded set due
-- at put start + release timeout) and moves due discarded buffers to the outbox.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: discard timeout ms, release timeout ms, limit per shard and kind; then group
--       count, then per group: anchor, shard index, 0.
-- Returns: {discarded count, released count, {continuation...}, {{shard, outbox entry}...}}.
-- Errors: none.
--!include store.lua

local discard, release, limit = argn(), argn(), argn()
local now = now_ms()
local discarded, released, conts, frees = 0, 0, {}, {}
each_group(function(tag, shard, n)
  local stale = redis.call('ZRANGEBYSCORE', K.processing(tag), '-inf', now - discard, 'LIMIT', 0, limit)
  for _, key in ipairs(stale) do
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.created_ms, F.obj.replicas)
    if not f[1] or store_any_complete(store_replicas(f[2])) then
      redis.call('ZREM', K.processing(tag), key)
    elseif tonumber(f[1]) + discard <= now then
      store_erase(tag, shard, key, conts, frees, tonumber(f[1]) + release)
      redis.call('HINCRBY', K.stats(tag), 'put_start_discard_cnt', 1)
      discarded = discarded + 1
    end
  end
  local due = redis.call('ZRANGEBYSCORE', K.discarded(tag), '-inf', now, 'LIMIT', 0, limit)
  for _, e in ipairs(due) do
    redis.call('ZREM', K.discarded(tag), e)
    redis.call('RPUSH', K.outbox(tag), e)
    table.insert(frees, { shard, e })
    released = released + 1
  end
end)
return { discarded, released, conts, frees }
