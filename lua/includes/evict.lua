-- Eviction helpers inside ONE object shard (tag). Includes store.lua (and so everything it
-- includes).
--
-- Fencing: the evictor lease lives in the global tag, which a shard script cannot read on a
-- cluster. So every writing eviction script gets (epoch, lease expiry ms) in ARGV and refuses
-- when the lease is over by Redis time or when the shard has already seen a newer epoch (field
-- 'fence' of the shard's stats HASH, raised to the highest epoch that wrote there). A paused
-- former leader is refused by both.
--!include store.lua

-- Parses the groups of a batch script into a table first, so that the fence of every shard of
-- the call is checked before anything is written. Per group: tag, shard, item count, items
-- (each item = `width` ARGV values).
local function evict_groups(width)
  local out = {}
  local groups = argn()
  for g = 1, groups do
    local anchor = arg()
    local shard = argn()
    local n = argn()
    local items = {}
    for i = 1, n do
      local it = {}
      for j = 1, width do
        it[j] = arg()
      end
      items[i] = it
    end
    out[g] = { tag = K.tag(anchor), shard = shard, items = items }
  end
  return out
end

-- True when every shard of groups accepts epoch; raises the shards' fences to epoch. One HMGET
-- of each shard's stats (the fence, then the fields of `extra`, kept as g.stats for the
-- caller); with `defer` the raise is left to the caller's own HSET of those stats (g.raise:
-- the fence field and epoch go with it), one write per shard instead of two.
local function evict_fence(groups, epoch, expires, now, extra, defer)
  if now >= expires then
    return false
  end
  for _, g in ipairs(groups) do
    local row = redis.call('HMGET', K.stats(g.tag), F.stats.fence, unpack(extra or {}))
    local fence = tonumber(row[1]) or 0
    if epoch < fence then
      return false
    end
    g.stats, g.raise = row, epoch > fence
  end
  if not defer then
    for _, g in ipairs(groups) do
      if g.raise then
        redis.call('HSET', K.stats(g.tag), F.stats.fence, epoch)
      end
    end
  end
  return true
end

-- Whether every replica of record raw (field r) is COMPLETE, and the bytes they hold (decimal
-- string), read from the record alone: a status and a length need no segment-table lookup.
-- A length of at most 10 hex digits (below 2^40: thousands of them sum exactly) adds as a
-- number; a longer one as a u64 (a dec_add and u64_to_dec per replica cost about 300 VM
-- instructions).
local function evict_record(raw)
  local all, b, n = true, '0', 0
  for st, len in string.gmatch(raw or '', '[^,;]+,([^,;]+),[^,;]+,[^,;]+,([^,;]+)') do
    all = all and st == 'C'
    local x = #len <= 10 and tonumber(len, 16)
    if x and x >= 0 then
      n = n + x
    else
      len = store_unhex(len)
      if u64_valid(len) then
        b = dec_add(b, u64_to_dec(len))
      end
    end
  end
  return all, n == 0 and b or dec_add(b, string.format('%d', n))
end

-- Whether object key may be evicted now. Returns status, bytes, soft:
-- 'ok' | 'absent' (not stored) | 'hard' (hard pinned) | 'lease' (lease not expired) |
-- 'busy' (a replica not COMPLETE); soft = soft pin active. vals (optional): the fields of the
-- key's hash as already read (evict_node's HGETALL of a block hash holding its block key).
local evict_obj_fields = { F.obj.put_id, F.obj.replicas, F.obj.lease_ms, F.obj.soft_pin_ms, F.obj.hard_pin }
local function evict_object_state(tag, key, now, vals)
  local f
  if vals then
    f = {}
    for j, name in ipairs(evict_obj_fields) do
      f[j] = vals[name] or false
    end
  else
    f = redis.call('HMGET', K.obj(tag, key), unpack(evict_obj_fields))
  end
  if not f[1] then
    return 'absent', '0', false
  end
  if f[5] == '1' then
    return 'hard', '0', false
  end
  if (tonumber(f[3]) or 0) > now then
    return 'lease', '0', false
  end
  local complete, bytes = evict_record(f[2])
  if not complete then
    return 'busy', '0', false
  end
  local soft = f[4] ~= false and (tonumber(f[4]) or 0) > now
  return 'ok', bytes, soft
end

-- Node h in one HGETALL, for the read steps (what radix_keys, radix_nchildren and the row's
-- HMGET would read): {keys = its registered keys (radix_keys' order), nc = child count,
-- f = {score, hits, parent, parent shard, stamp, exposed} (strings or false), vals = every other
-- field by name (the block key's object fields among them)}; false when the node does not exist.
-- The parent is as the node stores it ('>' + 32 bytes: radix_parent_field): the rows go to
-- the caller so (records.node_parent_hash decodes it), and a walk decodes only the parents it
-- climbs to (radix_parent_hash).
local sbyte = string.byte
local evict_row_fields = { F.node.score, F.node.hits, F.node.parent, F.node.parent_shard, F.node.stamp, F.node.exposed }
local function evict_node(tag, h)
  local flat = redis.call('HGETALL', K.node(tag, h))
  if #flat == 0 then
    return false
  end
  local keys, vals, nk = {}, {}, 0
  for i = 1, #flat, 2 do
    local name = flat[i]
    local c = sbyte(name) -- a number: no one-byte string made per field
    if c == 46 then -- '.'
      nk = nk + 1
      keys[nk] = h .. string.sub(name, 2)
    elseif c == 47 then -- '/'
      nk = nk + 1
      keys[nk] = string.sub(name, 2)
    elseif c ~= 62 and c ~= 60 then -- not a child edge ('>', '<')
      vals[name] = flat[i + 1]
    end
  end
  if not vals[F.node.created_ms] then
    return false -- a block hash holding only its block key's object (K.obj): no node
  end
  local f = {}
  for j, name in ipairs(evict_row_fields) do
    f[j] = vals[name] or false
  end
  return { keys = keys, nc = tonumber(vals[F.node.nchildren]) or 0, f = f, vals = vals }
end

-- Whether leaf h may be evicted now (all its keys together). Returns status, bytes (decimal
-- string), objects, soft: status 'ok', 'gone' (no node / no keys), 'inner' (has children), or the first blocking
-- object status ('hard', 'lease', 'busy'). Keys registered but not stored do not block.
-- any_node: judge an inner node as if its children were gone (never 'inner').
-- node (optional): the node as evict_node read it (false: no such node), not read again.
local function evict_leaf_state(tag, h, now, any_node, node)
  if node == false then
    return 'gone', '0', 0, false
  end
  local nc = node and node.nc or nil
  if not any_node and (nc or radix_nchildren(tag, h)) > 0 then
    return 'inner', '0', 0, false
  end
  local keys = node and node.keys or radix_keys(tag, h)
  if #keys == 0 then
    return 'gone', '0', 0, false
  end
  local bytes, objs, soft = '0', 0, false
  for _, key in ipairs(keys) do
    local st, b, sp = evict_object_state(tag, key, now, node and key == h and node.vals or nil)
    if st == 'ok' then
      bytes = dec_add(bytes, b)
      objs = objs + 1
      soft = soft or sp
    elseif st ~= 'absent' then
      return st, '0', 0, false
    end
  end
  return 'ok', bytes, objs, soft
end

-- Candidate row of a leaf: {hash, score s, hits h, bytes, objects, soft 0/1, parent (as its
-- node stores it: evict_node), parent shard, index score z, stamp k, clock, exposed 0/1}: z is
-- the leaf's score in the leaves index, or for a node not in it yet (a parent read ahead) the score it will get there
-- (radix_leaf_score); k is the logical clock the node was stamped with at its put or last hit
-- and clock the shard's logical clock as the evictor last published it (tiered: a fresh leaf
-- with k >= clock was put since that pass, the put grace; both 0 unless tiered).
-- node (optional): the node as evict_node read it; z (optional): its index score as just read.
local function evict_leaf_row(tag, h, bytes, objs, soft, node, z)
  local f
  if node then
    f = node.f
  else
    f = redis.call('HMGET', K.node(tag, h), F.node.score, F.node.hits, F.node.parent, F.node.parent_shard, F.node.stamp, F.node.exposed)
  end
  if not z and not (node and node.nc > 0) then -- an inner node is never in the index (fsck)
    z = redis.call('ZSCORE', K.leaves(tag), h)
  end
  local st = radix_tier_state(tag)
  if not z then
    -- not in the index (a parent read ahead): the score it will get there (radix_leaf_score)
    if node and st then
      z = string.format('%.17g', radix_tier_score(st, f[5], f[2], f[6]))
    elseif node then
      z = string.format('%.17g', tonumber(f[1]) or 0)
    else
      z = string.format('%.17g', radix_leaf_score(tag, h))
    end
  end
  local clock = st and st.clock or 0
  return { h, f[1] or '0', f[2] or '0', bytes, objs, soft and 1 or 0, f[3] or '', f[4] or '-1', z, f[5] or '0', clock, f[6] == '1' and 1 or 0 }
end

-- Evicts leaf h (keys: its registered keys as evict_node read them, else read here): erases
-- every stored key (frees to the outbox, unregistered from the radix
-- index) and unregisters the keys registered but not stored; the node then collapses and its
-- parent becomes a leaf (same shard) or a continuation comes back (other shard).
-- Returns the erased object keys, the count of keys removed from the index, bytes freed
-- (decimal string).
local function evict_leaf(tag, shard, h, conts, frees, keys)
  keys = keys or radix_keys(tag, h)
  local erased, bytes = {}, '0'
  for _, key in ipairs(keys) do
    local stored, r, unregistered = store_erase(tag, shard, key, conts, frees, nil)
    if stored then
      local _, b = evict_record(r)
      bytes = dec_add(bytes, b)
      table.insert(erased, key)
    end
    if unregistered ~= h then -- a key registered here but not stored (or stored elsewhere)
      radix_remove_key(tag, shard, h, key, conts)
    end
  end
  return erased, #keys, bytes
end

local evict_local = radix_local

-- Runs the continuations of an eviction (unlink child from a parent in another shard) here
-- when that shard is on this node, atomically with the eviction, cascading on; the rest (other
-- nodes) is appended to conts for the caller.
local function evict_unlink_local(tag, local_conts, conts)
  local q = 1
  while q <= #local_conts do
    local c = local_conts[q]
    q = q + 1
    local ptag = K.shard(tag, c[2])
    if c[2] ~= '-1' and evict_local(ptag) then
      radix_unlink_edge(ptag, tonumber(c[2]), c[1], c[3], c[4], local_conts)
    else
      table.insert(conts, c)
    end
  end
end

-- Index of the first ZSET element after the cursor (score cs, member cm) in (score, member)
-- order, also when the cursor member has left the set meanwhile. Elements with score cs and a
-- member <= cm may still follow the returned index: callers skip them (evict_after_cursor).
local function evict_cursor_start(zkey, csn, cm)
  if not csn then
    return 0
  end
  local r = redis.call('ZRANK', zkey, cm)
  if r then
    return r + 1
  end
  return redis.call('ZCOUNT', zkey, '-inf', '(' .. string.format('%.17g', csn))
end

local function evict_after_cursor(s, m, csn, cm)
  return not (csn and s == csn and m <= cm)
end
