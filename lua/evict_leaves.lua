#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_leaves: write step of radix eviction: evicts whole leaves, each atomically: re-checks
-- that it is still a leaf (no child: a parent that gained a child survives) and that every key
-- may be evicted now, then erases every stored key (buffer frees to the shard outbox, keys
-- unregistered) and unregisters the keys registered but not stored. The node collapses; a parent
-- in the same shard becomes a leaf, one in another shard comes back as a continuation.
-- Each continuation is also journaled in the shard's unlinks LIST until the caller has run it
-- (evict_unlinks_ack), so that a successor finishes the cascade of an evictor that died.
-- Fenced: refused as a whole when the evictor lease is over or a shard saw a newer epoch.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: epoch, lease expiry ms, allow soft-pinned (0/1); then group count, then per group:
--       anchor, shard index, n, then n leaf hashes.
-- Returns: {1, {per leaf: {status, {erased object key...}, keys unregistered, bytes, parent,
--          parent shard}},
--          {continuation...}, {{shard, outbox entry}...}, now ms, {{shard, journal entry}...}},
--          or {0} when fenced.
--          status: 'ok' (evicted) or why not ('gone', 'inner', 'hard', 'lease', 'busy', 'soft').
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua
--!include radix.lua
--!include store.lua
--!include evict.lua

local epoch, expires, allow_soft = argn(), argn(), argn()
local now = now_ms()
local groups = evict_groups(1)
if not evict_fence(groups, epoch, expires, now) then
  return { 0 }
end
local out, conts, frees, journal = {}, {}, {}, {}
for _, g in ipairs(groups) do
  local tag = g.tag
  for _, it in ipairs(g.items) do
    local h = it[1]
    local st, _, _, soft = evict_leaf_state(tag, h, now)
    if st == 'ok' and soft and allow_soft ~= 1 then
      st = 'soft'
    end
    if st ~= 'ok' then
      table.insert(out, { st, {}, 0, 0, '', '-1' })
    else
      local p = redis.call('HMGET', K.node(tag, h), 'p', 'ps')
      local before = #conts
      local erased, nkeys, bytes = evict_leaf(tag, g.shard, h, conts, frees)
      for c = before + 1, #conts do
        local e = cjson.encode(conts[c])
        redis.call('RPUSH', K.unlinks(tag), e)
        table.insert(journal, { g.shard, e })
      end
      redis.call('HINCRBY', K.stats(tag), 'evicted_keys', #erased)
      redis.call('HINCRBY', K.stats(tag), 'evicted_bytes', bytes)
      table.insert(out, { 'ok', erased, nkeys, bytes, p[1] or '', p[2] or '-1' })
    end
  end
end
return { 1, out, conts, frees, now, journal }
