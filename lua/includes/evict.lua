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
  each_group(function(tag, shard, n)
    local items = {}
    for i = 1, n do
      local it = {}
      for j = 1, width do
        it[j] = arg()
      end
      items[i] = it
    end
    out[#out + 1] = { tag = tag, shard = shard, items = items }
  end)
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

-- The tiered leaf policy's clocks after eviction, in each group's stats (the groups cover every
-- shard): the turnover (blocks stored now: turnover, or '' for the sum of the groups' nodes
-- counters) and the logical clock raised by evicted leaves. rows: per group, {nodes, clock} as
-- read after the eviction; with an epoch, the fence of a group that raises it (g.raise, from
-- evict_fence with defer) goes in the same write.
local function evict_publish_clocks(groups, rows, turnover, evicted, epoch)
  if turnover == '' then
    local sum = 0
    for i = 1, #groups do
      sum = sum + (tonumber(rows[i][1]) or 0)
    end
    turnover = string.format('%d', sum)
  end
  for i, g in ipairs(groups) do
    local w = { F.stats.turnover, turnover, F.stats.clock, string.format('%d', (tonumber(rows[i][2]) or 0) + evicted) }
    if epoch and g.raise then
      w[5], w[6] = F.stats.fence, epoch
    end
    redis.call('HSET', K.stats(g.tag), unpack(w))
  end
end

-- Whether an eviction call met its pass's goal (eviction/goal.py Goal.need, from the same
-- numbers): ask = {leaves, ratio, bytes still to free before the call, objects still to
-- evict before it ('': the goal is in bytes)}; evicted[tag] = {objects, bytes (decimal)} of
-- the call's shards (tags); usage: the goal's segments' segment_info rows after the frees.
local function evict_goal_met(ask, tags, evicted, usage)
  local objects, bytes = 0, 0
  for _, tag in ipairs(tags) do
    objects, bytes = objects + evicted[tag][1], bytes + tonumber(evicted[tag][2])
  end
  if ask.objects ~= '' then
    return tonumber(ask.objects) - objects <= 0
  end
  local allocated, capacity = 0, 0
  for _, row in ipairs(usage) do
    if row[8] == '1' then
      allocated = allocated + tonumber(row[7] or '0', 16)
      capacity = capacity + tonumber(row[3] or '0', 16)
    end
  end
  return allocated - math.floor(ask.ratio * capacity) <= 0 and ask.bytes - bytes <= 0
end

-- evict_publish's write from an eviction call whose groups cover every shard and whose fences
-- it raised already: the clocks raised by the pass's evicted leaves not published before.
-- g.stats[4] is the clock its fence read took (evict_leaves); the nodes counter is read after
-- the call's evictions.
local function evict_publish_now(groups, evicted)
  local rows = {}
  for i, g in ipairs(groups) do
    rows[i] = { redis.call('HGET', K.stats(g.tag), F.stats.nodes), g.stats[4] }
  end
  evict_publish_clocks(groups, rows, '', evicted)
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
  if n == 0 then
    return all, b
  end
  return all, b == '0' and string.format('%d', n) or dec_add(b, string.format('%d', n))
end

-- Whether object key may be evicted now. Returns status, bytes, soft:
-- 'ok' | 'absent' (not stored) | 'hard' (hard pinned) | 'lease' (lease not expired) |
-- 'busy' (a replica not COMPLETE); soft = soft pin active. of (optional): the key's
-- evict_obj_fields as already read (a node's `of`: the block hash holding its block key).
local evict_obj_fields = { F.obj.put_id, F.obj.replicas, F.obj.lease_ms, F.obj.soft_pin_ms, F.obj.hard_pin }
local function evict_object_state(tag, key, now, of)
  local f = of or redis.call('HMGET', K.obj(tag, key), unpack(evict_obj_fields))
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
-- ne = child edge fields present,
-- f = {score, hits, parent, parent shard, stamp, exposed} (strings or false), vals = every other
-- field by name, of = the block key's evict_obj_fields (strings or false)}; false when the node
-- does not exist. Each list is one constructor: sized once, not grown field by field.
-- The parent is as the node stores it ('>' + 32 bytes: radix_parent_field): the rows go to
-- the caller so (records.node_parent_hash decodes it), and a walk decodes only the parents it
-- climbs to (radix_parent_hash).
local evict_row_fields = { F.node.score, F.node.hits, F.node.parent, F.node.parent_shard, F.node.stamp, F.node.exposed }
local function evict_node(tag, h)
  local flat = redis.call('HGETALL', K.node(tag, h))
  if #flat == 0 then
    return false
  end
  -- vals sized by its constructor for the fields an MLA block holds (a table grown by
  -- assignment rehashes at 1, 2, 4, 8 and 16 entries); false reads as absent everywhere.
  local N, O = F.node, F.obj
  local vals = { [N.parent] = false, [N.parent_shard] = false, [N.created_ms] = false,
    [N.score] = false, [N.stamp] = false, [N.nkeys] = false, [N.nchildren] = false,
    [N.exposed] = false, [O.client] = false, [O.created_ms] = false, [O.size] = false,
    [O.lease_ms] = false, [O.status] = false, [O.put_id] = false, [O.replicas] = false,
    [O.radix] = false }
  local keys, nk, ne, sbyte = {}, 0, 0, string.byte
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
    else
      ne = ne + 1
    end
  end
  if not vals[F.node.created_ms] then
    return false -- a block hash holding only its block key's object (K.obj): no node
  end
  local r, o = evict_row_fields, evict_obj_fields
  local f = { vals[r[1]] or false, vals[r[2]] or false, vals[r[3]] or false, vals[r[4]] or false,
    vals[r[5]] or false, vals[r[6]] or false }
  local of = { vals[o[1]] or false, vals[o[2]] or false, vals[o[3]] or false, vals[o[4]] or false,
    vals[o[5]] or false }
  return { keys = keys, nc = tonumber(vals[F.node.nchildren]) or 0, ne = ne, f = f, vals = vals, of = of }
end

-- Node h for the read steps (evict_candidates, evict_ancestors), as evict_node answers it but
-- without the child edge count (ne): a block whose one key is the block itself (an MLA key,
-- the common node) in one HMGET of the fields those steps read, 15 strings instead of the
-- HGETALL's 35-45 (the Lua strings a reply makes are most of a row's cost); any other node
-- (several keys, another key) read whole by evict_node. A call that met such a node reads the
-- rest whole at once: a namespace's blocks are mostly of one kind, and an MHA node would
-- otherwise cost the HMGET and the HGETALL.
local evict_hot_fields = { F.node.created_ms, F.node.nkeys, '.', F.node.nchildren }
for _, name in ipairs(evict_row_fields) do
  evict_hot_fields[#evict_hot_fields + 1] = name
end
for _, name in ipairs(evict_obj_fields) do
  evict_hot_fields[#evict_hot_fields + 1] = name
end
local evict_read_whole = false
local function evict_node_read(tag, h)
  if evict_read_whole then
    return evict_node(tag, h)
  end
  local v = redis.call('HMGET', K.node(tag, h), unpack(evict_hot_fields))
  if not v[1] then
    return false -- no node (no hash, or a block hash holding only its block key's object)
  end
  if v[2] ~= '1' or not v[3] then
    evict_read_whole = true
    return evict_node(tag, h)
  end
  return { keys = { h }, nc = tonumber(v[4]) or 0, f = { v[5], v[6], v[7], v[8], v[9], v[10] },
    of = { v[11], v[12], v[13], v[14], v[15] } }
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
    local st, b, sp = evict_object_state(tag, key, now, node and key == h and node.of or nil)
    if st == 'ok' then
      bytes = bytes == '0' and b or dec_add(bytes, b) -- b is evict_record's: a plain decimal
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
-- a, b, c (optional): a chain entry's head (status, children, shard), put before the row in the
-- same table: a reply pays about 2 thousand instructions per table (docs/architecture.md).
local function evict_leaf_row(tag, h, bytes, objs, soft, node, z, a, b, c)
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
    if node then
      z = string.format('%.17g', radix_score_of(st, f[1], f[5], f[2], f[6]))
    else
      z = string.format('%.17g', radix_leaf_score(tag, h))
    end
  end
  local clock = st and st.clock or 0
  local s, hits, sf, par, ps = f[1] or '0', f[2] or '0', soft and 1 or 0, f[3] or '', f[4] or '-1'
  local k, x = f[5] or '0', f[6] == '1' and 1 or 0
  if a then -- a chain entry: status, children, shard, then the row, in one table
    return { a, b, c, h, s, hits, bytes, objs, sf, par, ps, z, k, clock, x }
  end
  return { h, s, hits, bytes, objs, sf, par, ps, z, k, clock, x }
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

-- A call's deferred writes to one shard from evict_block_leaf (evict_flush writes them): the
-- stats counters, the index removals and the outbox entries, one command each per shard and
-- call instead of one per leaf.
-- A running sum of decimal strings kept as t[ks] (a decimal string) plus t[kn] (a number): a
-- value of at most 12 digits goes to the number while it is below 2^52 (exact), any other to
-- the string; evict_sum folds the number in and returns the sum. A dec_add per leaf was a printf
-- and two strtod.
local function evict_sum_add(t, ks, kn, v)
  if #v <= 12 and t[kn] < 4503599627370496 then
    t[kn] = t[kn] + tonumber(v)
  else
    t[ks] = dec_add(t[ks], v)
  end
end
local function evict_sum(t, ks, kn)
  if t[kn] > 0 then
    t[ks], t[kn] = dec_add(t[ks], string.format('%d', t[kn])), 0
  end
  return t[ks]
end

-- size / sizen: the evicted objects' sizes (evict_sum_add).
local function evict_acc()
  return { objects = 0, size = '0', sizen = 0, nodes = 0, gone = {}, outbox = {} }
end

-- Every field a block hash may hold besides its key field '.': its block key's object's fields
-- and its node's (RADIX_NODE_FIELDS). Built on first use in a call.
local evict_droppable = nil
local function evict_block_droppable()
  if not evict_droppable then
    evict_droppable = {}
    for _, name in pairs(F.obj) do
      evict_droppable[name] = true
    end
    for _, name in ipairs(RADIX_NODE_FIELDS) do
      evict_droppable[name] = true
    end
  end
  return evict_droppable
end

-- Evicts leaf h when its block hash holds exactly one leaf node, its block key h registered
-- there ('.') and that key's stored object, nothing else (an MLA block: node as evict_node read
-- it, checked by the caller to be 'ok'): one DEL instead of the general path's field-by-field
-- steps (store_erase, radix_remove_key, radix_collapse), with the same result: the replicas'
-- frees (to frees and acc.outbox), the shard counters and the index removals deferred to acc,
-- then the edge from the parent (radix_unlink_parent; a parent in this shard collapses on).
-- bytes: what evict_leaf_state found the leaf holds (its one object's replicas). Returns false
-- when h is not such a leaf (the caller takes the general path), else the erased keys, the
-- keys unregistered (1) and bytes.
local function evict_block_leaf(tag, shard, h, node, bytes, frees, acc, conts)
  local v = node.vals
  if node.nc ~= 0 or node.ne ~= 0 or #node.keys ~= 1 or node.keys[1] ~= h or not v[F.obj.put_id]
      or not v[F.obj.radix] or v[F.obj.prefix] or v[F.obj.prefix_len] then
    return false
  end
  local droppable = evict_block_droppable()
  for name in pairs(v) do
    if not droppable[name] then
      return false
    end
  end
  -- Each replica's free entry (store_free_entry), with its parts beside it for
  -- evict_free_here (fields a reply drops: only the array part is sent).
  local pid = v[F.obj.put_id]
  for ref, off in string.gmatch(v[F.obj.replicas] or '', '[^,;]+,[^,;]+,([^,;]+),([^,;]+),[^,;]+') do
    local seg = store_segment(tag, ref)[1]
    off = store_unhex(off)
    local e = store_free_entry(seg, off, pid)
    acc.outbox[#acc.outbox + 1] = e
    frees[#frees + 1] = { shard, e, seg = seg, off = off, pid = pid }
  end
  redis.call('DEL', K.node(tag, h))
  acc.objects, acc.nodes = acc.objects + 1, acc.nodes + 1
  evict_sum_add(acc, 'size', 'sizen', v[F.obj.size] or '0')
  acc.gone[#acc.gone + 1] = h
  local p = radix_unlink_parent(tag, shard, h,
    { v[F.node.parent] or false, v[F.node.parent_shard] or false, v[F.node.link_gen] or false, v[F.node.created_ms] }, conts)
  if p then
    radix_collapse(tag, shard, p, conts)
  end
  return { h }, 1, bytes
end

-- The shard counters an eviction call changes, as evict_flush reads and writes them.
local EVICT_COUNTERS = { F.stats.objects, F.stats.rkeys, F.stats.nodes, F.stats.bytes,
  F.stats.evicted_keys, 'evicted_bytes' }

-- Writes one shard's deferrals at the end of an eviction call: acc (evict_block_leaf's: the
-- object, key and node counters, the lru / processing / leaves / orphans removals, the outbox
-- entries) and the call's evicted keys and bytes (decimal string) there. The counters in one
-- HMGET and one HSET (what store_erase, radix_remove_key and radix_collapse add per leaf with
-- HINCRBY, bytes floored at 0 as dec_hincr does), then one ZREM per index that exists.
-- no_outbox: the entries are applied in the call (evict_free.lua), not pushed.
local function evict_flush(tag, acc, keys, bytes, no_outbox)
  local stats = K.stats(tag)
  evict_sum(acc, 'size', 'sizen')
  local c = redis.call('HMGET', stats, unpack(EVICT_COUNTERS))
  local w, n = {}, 0
  if acc.objects > 0 then
    w[1], w[2] = EVICT_COUNTERS[1], string.format('%d', (tonumber(c[1]) or 0) - acc.objects)
    w[3], w[4] = EVICT_COUNTERS[2], string.format('%d', (tonumber(c[2]) or 0) - acc.objects)
    w[5], w[6] = EVICT_COUNTERS[3], string.format('%d', (tonumber(c[3]) or 0) - acc.nodes)
    w[7], w[8] = EVICT_COUNTERS[4], dec_sub(c[4] or '0', acc.size)
    n = 8
  end
  if keys > 0 then
    w[n + 1], w[n + 2] = EVICT_COUNTERS[5], string.format('%d', (tonumber(c[5]) or 0) + keys)
    w[n + 3], w[n + 4] = EVICT_COUNTERS[6], dec_add(c[6] or '0', bytes)
    n = n + 4
  end
  if n > 0 then
    redis.call('HSET', stats, unpack(w))
  end
  if #acc.gone > 0 then
    variadic('ZREM', K.leaves(tag), acc.gone)
    -- A registered block key is in none of these (the leaves order it): one read, and the
    -- removals only where one of them exists, as store_erase and radix_collapse would do.
    if redis.call('EXISTS', K.lru(tag), K.processing(tag), K.orphans(tag)) > 0 then
      variadic('ZREM', K.lru(tag), acc.gone)
      variadic('ZREM', K.processing(tag), acc.gone)
      variadic('ZREM', K.orphans(tag), acc.gone)
    end
  end
  if not no_outbox then
    variadic('RPUSH', K.outbox(tag), acc.outbox)
  end
end

-- Runs the continuations of an eviction (unlink child from a parent in another shard) here
-- when that shard is on this node, atomically with the eviction, cascading on; the rest (other
-- nodes) is appended to conts for the caller.
local function evict_unlink_local(tag, local_conts, conts)
  local q = 1
  while q <= #local_conts do
    local c = local_conts[q]
    q = q + 1
    local ptag = K.shard(tag, c[2])
    if c[2] ~= '-1' and radix_local(ptag) then
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

-- evict_ancestors' read of one chain: from node h of shard `shard` (tag), then up while a
-- node has exactly one child and its parent's shard is on this node, at most depth nodes,
-- what each node would be as a leaf once its children are gone: {{status, children, shard,
-- row...}...} (the row's fields follow in the entry), the named node first; a node not 'ok'
-- ends it (no row).
local function evict_chain(tag, shard, h, depth, now)
  local chain = {}
  for _ = 1, depth do
    local node = evict_node_read(tag, h)
    local st, b, o, soft = evict_leaf_state(tag, h, now, true, node)
    local nc = node and node.nc or 0
    if st ~= 'ok' then
      chain[#chain + 1] = { st, nc, shard }
      break
    end
    local row = evict_leaf_row(tag, h, b, o, soft, node, nil, st, nc, shard)
    chain[#chain + 1] = row
    local p, ps = row[10], tonumber(row[11])
    if nc ~= 1 or p == '' or not ps or ps < 0 then
      break
    end
    p = radix_parent_hash(p)
    local ptag = K.shard(tag, ps)
    if not radix_local(ptag) then
      break
    end
    tag, shard, h = ptag, ps, p
  end
  return chain
end
