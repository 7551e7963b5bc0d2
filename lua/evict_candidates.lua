#!lua flags=no-writes,allow-cross-slot-keys
-- evict_candidates: read step of radix eviction: walks each shard's evictable-leaf index from a
-- cursor in score order and returns the leaves that may be evicted now (every key's lease over,
-- not hard pinned, COMPLETE; soft-pinned ones flagged), at most `max` per shard and `limit`
-- leaves examined per shard. A leaf whose score (its newest lease) is not in the past ends the
-- walk: every later leaf is leased too. Leaves it skips are counted, and the cursor moves past
-- them, so a pass never examines a leaf twice.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: max per shard, limit per shard; then group count, then per group: anchor, shard
--       index, 1, then cursor score ('' = start), cursor member.
-- Returns: {now ms, per group: {{row...}, cursor score, cursor member, exhausted 0/1,
--          skipped lease, skipped hard, skipped busy}}, row = {hash, score, hits, bytes,
--          objects, soft 0/1, parent, parent shard, index score, stamp, shard clock,
--          exposed 0/1} (evict_leaf_row).
-- Errors: none.
--!include evict.lua

local max, limit = argn(), argn()
local now = now_ms()
local out = {}
for _, g in ipairs(evict_groups(2)) do
  local tag = g.tag
  local lk = K.leaves(tag)
  local cs, cm = g.items[1][1], g.items[1][2]
  local csn = tonumber(cs)
  local start = evict_cursor_start(lk, csn, cm)
  local rows, scanned, exhausted = {}, 0, 0
  local sk = { lease = 0, hard = 0, busy = 0 }
  local step = math.max(16, max)
  local done = false
  while not done do
    local chunk = redis.call('ZRANGE', lk, start, start + step - 1, 'WITHSCORES')
    if #chunk == 0 then
      exhausted, done = 1, true
    end
    for i = 1, #chunk, 2 do
      local h, s = chunk[i], tonumber(chunk[i + 1])
      if s >= now then
        exhausted, done = 1, true
        break
      end
      if evict_after_cursor(s, h, csn, cm) then
        scanned = scanned + 1
        local node = evict_node(tag, h)
        local st, b, o, soft = evict_leaf_state(tag, h, now, false, node)
        if st == 'ok' then
          table.insert(rows, evict_leaf_row(tag, h, b, o, soft, node, chunk[i + 1]))
        elseif sk[st] then
          sk[st] = sk[st] + 1
        end
        cs, cm = chunk[i + 1], h
        if #rows >= max or scanned >= limit then
          done = true
          break
        end
      end
    end
    start = start + step
  end
  table.insert(out, { rows, cs, cm, exhausted, sk.lease, sk.hard, sk.busy })
end
return { now, out }
