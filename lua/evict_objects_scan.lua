#!lua flags=no-writes,allow-cross-slot-keys
-- evict_objects_scan: read step of the traditional BatchEvict: walks each shard's lru index
-- (complete, not hard-pinned objects by lease timeout) from a cursor, oldest lease first, over
-- the objects whose lease expired, and returns those that may be evicted (soft-pinned flagged).
-- With `want` > 0 the walk stops once `want` not-soft-pinned objects are found; it never goes
-- past a lease of max_lease (the caller collects the ties of a threshold lease that way).
-- With no_tree = 1 objects registered in the radix index are skipped (the radix fallback).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: limit per shard (entries returned), no_tree (0/1); then group count, then per
--       group: anchor, shard index, 1, then cursor score ('' = start), cursor member, want
--       (0 = no limit), max lease ('+inf' = none).
-- Returns: {now ms, per group: {{key, lease, soft 0/1, bytes, ...flattened}, cursor score,
--          cursor member, exhausted 0/1, skipped tree, skipped busy}}.
-- Errors: none.
--!include evict.lua

local limit, no_tree = argn(), argn()
local now = now_ms()
local out = {}
for _, g in ipairs(evict_groups(4)) do
  local tag = g.tag
  local zk = K.lru(tag)
  local cs, cm, want = g.items[1][1], g.items[1][2], tonumber(g.items[1][3])
  local maxl = tonumber(g.items[1][4]) or math.huge
  local csn = tonumber(cs)
  local start = evict_cursor_start(zk, csn, cm)
  local rows, found, nonsoft, scanned, exhausted = {}, 0, 0, 0, 0
  local sk_tree, sk_busy = 0, 0
  local step = 64
  local done = false
  while not done do
    local chunk = redis.call('ZRANGE', zk, start, start + step - 1, 'WITHSCORES')
    if #chunk == 0 then
      exhausted, done = 1, true
    end
    for i = 1, #chunk, 2 do
      local key, l = chunk[i], tonumber(chunk[i + 1])
      if l > now or l > maxl then
        exhausted, done = (l > now) and 1 or 0, true
        break
      end
      if evict_after_cursor(l, key, csn, cm) then
        scanned = scanned + 1
        local st, b, soft = evict_object_state(tag, key, now)
        local skip = st ~= 'ok'
        if st == 'ok' and no_tree == 1 then
          local f = redis.call('HMGET', K.obj(tag, key), F.obj.radix, F.obj.prefix, F.obj.prefix_len)
          if f[1] or radix_has_key(tag, store_prefix(key, f[2], f[3]), key) then
            skip = true
            sk_tree = sk_tree + 1
          end
        elseif skip then
          sk_busy = sk_busy + 1
        end
        if not skip then
          table.insert(rows, key)
          table.insert(rows, chunk[i + 1])
          table.insert(rows, soft and 1 or 0)
          table.insert(rows, b)
          found = found + 1
          if not soft then
            nonsoft = nonsoft + 1
          end
        end
        cs, cm = chunk[i + 1], key
        if found >= limit or scanned >= 4 * limit or (want > 0 and nonsoft >= want) then
          done = true
          break
        end
      end
    end
    start = start + step
  end
  table.insert(out, { rows, cs, cm, exhausted, sk_tree, sk_busy })
end
return { now, out }
