#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_keys: write step of the traditional BatchEvict: evicts the named objects, each after
-- re-checking that it may be evicted now (exists, lease expired, not hard pinned, every replica
-- COMPLETE, soft pin only when allowed, and with no_tree = 1 not registered in the radix index).
-- An evicted object is erased: buffer frees to the shard outbox, unregistered from the radix
-- index (with radix eviction disabled there is no tree to protect). On a single Redis (here = 1)
-- the frees are applied to the segments' allocators in this call (evict_free.lua) and the
-- outbox entries dropped at once.
-- Fenced: refused as a whole when the evictor lease is over or a shard saw a newer epoch.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: epoch, lease expiry ms, allow soft-pinned (0/1), no_tree (0/1), here (1: apply
--       the frees in this call, a single Redis only); then group count,
--       then per group: anchor, shard index, n, then n keys.
-- Returns: {1, {per key: {status, bytes}}, {continuation...}, {{shard, outbox entry}...} (none
--          when here), now},
--          or {0} when fenced; status 'ok' or why not ('absent', 'hard', 'lease', 'busy',
--          'soft', 'tree').
-- Errors: none.
--!include evict_free.lua

local epoch, expires, allow_soft, no_tree, here = argn(), argn(), argn(), argn(), argn()
local now = now_ms()
local groups = evict_groups(1)
if not evict_fence(groups, epoch, expires, now) then
  return { 0 }
end
local out, conts, frees = {}, {}, {}
for _, g in ipairs(groups) do
  local tag = g.tag
  for _, it in ipairs(g.items) do
    local key = it[1]
    local st, b, soft = evict_object_state(tag, key, now)
    if st == 'ok' and soft and allow_soft ~= 1 then
      st = 'soft'
    end
    if st == 'ok' and no_tree == 1 then
      local f = redis.call('HMGET', K.obj(tag, key), F.obj.radix, F.obj.prefix, F.obj.prefix_len)
      if f[1] or radix_has_key(tag, store_prefix(key, f[2], f[3]), key) then
        st = 'tree'
      end
    end
    if st == 'ok' then
      store_erase(tag, g.shard, key, conts, frees, nil)
      redis.call('HINCRBY', K.stats(tag), F.stats.evicted_keys, 1)
      dec_hincr(K.stats(tag), 'evicted_bytes', b, false)
      table.insert(out, { 'ok', b })
    else
      table.insert(out, { st, '0' })
    end
  end
end
if here == 1 and #frees > 0 then
  evict_free_here(groups[1].tag, frees, {}) -- store_erase pushed every one
  frees = {}
end
return { 1, out, conts, frees, now }
