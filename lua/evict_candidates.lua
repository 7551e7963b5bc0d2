#!lua flags=no-writes,allow-cross-slot-keys
-- evict_candidates: read step of radix eviction: walks each shard's evictable-leaf index from a
-- cursor in score order and returns the leaves that may be evicted now (every key's lease over,
-- not hard pinned, COMPLETE; soft-pinned ones flagged), at most `max` per shard and `limit`
-- leaves examined per shard. A leaf whose score (its newest lease) is not in the past ends the
-- walk: every later leaf is leased too. Leaves it skips are counted, and the cursor moves past
-- them, so a pass never examines a leaf twice.
-- With want > 0 the call first merges its shards' indexes (entries after each cursor, scores in
-- the past) in (score, member) order and walks each shard only for its share of the first
-- `want` entries (at most `max`): a shard with no share is not walked and its cursor stays,
-- and its first entry comes back as its peek (no unread leaf of it sorts before the peek).
-- A pass's first read may also read ahead what the pass's first ancestors read will ask
-- (eviction/radix_evict.py: RadixEvictor.pick's first choice and read_ancestors, in the
-- tiered policy's order): the chains come back with the nodes and depths they were read for,
-- and the evictor uses them only for a read that asks exactly those (a call fewer).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: max per shard, limit per shard, want (0 = every shard up to max), then the read
--       ahead: the policy's put grace ('' = none), bytes and objects the pass needs, leaves
--       per round, CHAIN_READ_AHEAD, PARENT_READ_AHEAD, SIDE_CHAIN_DEPTH; then group count,
--       then per group: anchor, shard index, 1, then cursor score ('' = start), cursor member.
-- Returns: {now ms, per group: {{row...}, cursor score, cursor member, exhausted 0/1,
--          skipped lease, skipped hard, skipped busy, peek score, peek member ('' '' unless
--          not walked)}, read ahead: {} or {{node hash, shard, depth...}, {chain...}} (chains
--          as evict_ancestors returns them)}, row = {hash, score, hits, bytes, objects, soft
--          0/1, parent (as its node stores it: records.node_parent_hash reads it), parent
--          shard, index score, stamp, shard clock, exposed 0/1} (evict_leaf_row).
-- Errors: none.
--!include evict.lua

local max, limit, want = argn(), argn(), argn()
local ahead = { grace = arg(), bytes = argn(), objects = argn(), round = argn(), chain = argn(),
  parents = argn(), side = argn() }
local now = now_ms()
local out = {}
local groups = evict_groups(2)

-- The first n entries after cursor (csn, cm) of index lk with a score in the past: {score
-- string, member}, in index order.
local function head_entries(lk, csn, cm, n)
  local start = evict_cursor_start(lk, csn, cm)
  local got = {}
  -- From the start (no cursor) the first n entries are the answer unless one is not in the
  -- past (the walk ends there): read n; after a cursor a few may still be at or before it.
  local step = csn and math.max(16, n) or n
  while true do
    local chunk = redis.call('ZRANGE', lk, start, start + step - 1, 'WITHSCORES')
    if #chunk == 0 then
      return got
    end
    for i = 1, #chunk, 2 do
      local h, s = chunk[i], tonumber(chunk[i + 1])
      if s >= now then
        return got
      end
      if evict_after_cursor(s, h, csn, cm) then
        got[#got + 1] = { chunk[i + 1], h, s }
        if #got >= n then
          return got
        end
      end
    end
    start = start + step
  end
end

-- The window of one shard: up to gmax evictable leaves after the cursor (cs, cm), at most
-- `limit` examined; the group's reply entry.
local function evict_window(tag, lk, cs, cm, csn, gmax)
  local start = evict_cursor_start(lk, csn, cm)
  local rows, scanned, exhausted = {}, 0, 0
  local sk = { lease = 0, hard = 0, busy = 0 }
  -- Twice the rows wanted (skipped leaves: the walk reads on; a larger chunk than that is
  -- mostly read for nothing, the reply converted all the same).
  local step = math.max(8, 2 * gmax)
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
        local node = evict_node_read(tag, h)
        local st, b, o, soft = evict_leaf_state(tag, h, now, false, node)
        if st == 'ok' then
          table.insert(rows, evict_leaf_row(tag, h, b, o, soft, node, chunk[i + 1]))
        elseif sk[st] then
          sk[st] = sk[st] + 1
        end
        cs, cm = chunk[i + 1], h
        if #rows >= gmax or scanned >= limit then
          done = true
          break
        end
      end
    end
    start = start + step
  end
  return { rows, cs, cm, exhausted, sk.lease, sk.hard, sk.busy, '', '' }
end

-- Per group: how many of the call's first `want` entries are its own (nil: no merge).
local share, heads = nil, {}
-- The first `want` of the merged heads, taken from a binary heap of the groups' next entries
-- (a scan of every head per entry taken cost about 45 k VM instructions a call at 64 shards, a
-- sort of their union 16 k); members are node hashes, unique across shards.
local function before(a, b)
  return a[3] < b[3] or (a[3] == b[3] and a[2] < b[2])
end
-- Sifts heap slot i's entry t = {entry, group, position} down to its place among n.
local function sift(hp, n, i, t)
  while true do
    local c = 2 * i
    if c > n then
      break
    end
    if c < n and before(hp[c + 1][1], hp[c][1]) then
      c = c + 1
    end
    if not before(hp[c][1], t[1]) then
      break
    end
    hp[i], i = hp[c], c
  end
  hp[i] = t
end
if want > 0 then
  share = {}
  local hp, n = {}, 0
  for gi, g in ipairs(groups) do
    local csn = tonumber(g.items[1][1])
    local hd = head_entries(K.leaves(g.tag), csn, g.items[1][2], math.min(want, max))
    heads[gi], share[gi] = hd, 0
    if hd[1] then
      n = n + 1
      hp[n] = { hd[1], gi, 1 }
    end
  end
  for i = math.floor(n / 2), 1, -1 do
    sift(hp, n, i, hp[i])
  end
  for _ = 1, want do
    if n == 0 then
      break
    end
    local t = hp[1]
    local gi = t[2]
    share[gi], t[3] = share[gi] + 1, t[3] + 1
    local e = heads[gi][t[3]]
    if e then
      t[1] = e
    else
      t, n = hp[n], n - 1
    end
    if n > 0 then
      sift(hp, n, 1, t)
    end
  end
end

for gi, g in ipairs(groups) do
  local tag = g.tag
  local lk = K.leaves(tag)
  local cs, cm = g.items[1][1], g.items[1][2]
  local csn = tonumber(cs)
  local gmax = max
  if share then
    gmax = share[gi]
  end
  if gmax == 0 then
    -- not walked: the cursor stays; its first entry (if any) bounds what it has unread
    local e = heads[gi][1]
    if e then
      table.insert(out, { {}, cs, cm, 0, 0, 0, 0, e[1], e[2] })
    else
      table.insert(out, { {}, cs, cm, 1, 0, 0, 0, '', '' })
    end
  else
    table.insert(out, evict_window(tag, lk, cs, cm, csn, gmax))
  end
end
-- The read ahead: the leaves in the tiered order (young, index score, name) as the evictor's
-- heap holds them, its first choice, and the parents that read_ancestors would ask for then.
local function read_ahead()
  local grace = tonumber(ahead.grace)
  local rows = {}
  for gi, g in ipairs(out) do
    for _, r in ipairs(g[1]) do
      if r[6] == 0 then -- a soft-pinned leaf waits aside
        local young = (tonumber(r[3]) or 0) <= 0 and r[12] ~= 1 and tonumber(r[11]) - tonumber(r[10]) < grace
        rows[#rows + 1] = { young and 1 or 0, tonumber(r[9]), r[1], r, groups[gi].tag }
      end
    end
  end
  table.sort(rows, function(a, b)
    if a[1] ~= b[1] then
      return a[1] < b[1]
    elseif a[2] ~= b[2] then
      return a[2] < b[2]
    end
    return a[3] < b[3]
  end)
  local c = rows[1]
  if not c then
    return {}
  end
  local cb, co = tonumber(c[4][4]), tonumber(c[4][5])
  if ahead.round <= 1 or (cb >= ahead.bytes and co >= ahead.objects) then
    return {} -- the round ends with its first choice
  elseif c[4][7] == '' or tonumber(c[4][8]) < 0 then
    return {} -- no parent to expose
  end
  local wanted
  if ahead.objects > co then
    wanted = ahead.objects - co
  else
    wanted = math.ceil((ahead.bytes - cb) / math.max(1, cb))
  end
  wanted = math.min(ahead.round - 1, math.max(1, wanted))
  local depth = math.max(1, math.min(ahead.chain, wanted))
  local side = math.min(ahead.side, depth)
  local nodes, seen, chains = {}, {}, {}
  for i = 1, 1 + math.min(ahead.parents, wanted) do
    local r = rows[i] and rows[i][4]
    local ps = r and tonumber(r[8])
    if r and r[7] ~= '' and ps >= 0 then
      local p = radix_parent_hash(r[7])
      if not seen[p] then
        local ptag = K.shard(c[5], ps)
        if not radix_local(ptag) then
          return {}
        end
        seen[p] = true
        local d = i == 1 and depth or side
        nodes[#nodes + 1], nodes[#nodes + 2], nodes[#nodes + 3] = p, ps, d
        chains[#chains + 1] = evict_chain(ptag, ps, p, d, now)
      end
    end
  end
  return { nodes, chains }
end
return { now, out, ahead.grace ~= '' and read_ahead() or {} }

