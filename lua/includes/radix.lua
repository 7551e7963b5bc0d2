-- Radix-tree node maintenance inside ONE shard (tag). Needs keys.lua, errors.lua, common.lua.
--
-- Node HASH fields: p parent hash ('' = unknown/root), ps parent shard (-1 = none), g link
-- generation of the edge parent->node, t created (ms), s leaf score, h hits, om '1' while its
-- children are marked as orphans, nk the count of registered keys; and one field per registered
-- key (no SET per node): '.' .. rest for a key that starts with the node hash (rest the key after
-- it: '.' alone for an MLA key, '._0_k' for an MHA one), '/' .. key for any other, value '1';
-- nc the count of children, and one field per child edge (no ZSET per node), value the link
-- generation: '>' .. the 32 bytes of a child hash of 64 lowercase hex digits (so the HASH stays
-- listpack-encoded: fields <= 64 bytes), '<' .. the hash for any other. With the tiered leaf
-- policy also k logical stamp, x '1' once it had a child (radix_tier_*).
-- A node is in the leaves index exactly when it has
-- registered keys and no children. Cross-shard steps are returned as continuations
-- {parent, parent_shard, child, gen} for the caller to run in the parent's shard (unlink
-- child-first); a parent's edge is dropped only when its generation still matches, so a child
-- re-linked meanwhile keeps its edge.
-- Orphans: a node whose objects' parent block has no object left (removed, revoked, unmounted,
-- its client expired) roots an orphaned subtree that can never be a prefix hit. The shard's
-- orphans ZSET (node -> ms) indexes such roots: when a node with children loses its last object
-- its children are marked, when it gains one again they are unmarked, by continuations
-- {child, -1 (the caller computes the shard), '', 'orphan' | 'adopt'}. Eviction takes orphaned
-- subtrees first; the put guard refuses a child of a marked node.
--!include common.lua

-- The node HASH field that registers key under node h.
local function radix_key_field(h, key)
  if string.sub(key, 1, #h) == h then
    return '.' .. string.sub(key, #h + 1)
  end
  return '/' .. key
end

-- Whether node h exists. A block key's object shares the block hash with its node (K.obj), so
-- the hash may exist without a node: a node is its created field t (every node has one).
local function radix_exists(tag, h)
  return redis.call('HEXISTS', K.node(tag, h), F.node.created_ms) == 1
end

-- Every field a node keeps besides its key and child fields ('om': orphan marks sent).
local RADIX_NODE_FIELDS = { F.node.parent, F.node.parent_shard, F.node.link_gen, F.node.created_ms,
  F.node.score, F.node.hits, F.node.nkeys, F.node.nchildren, F.node.stamp, F.node.exposed, 'om' }

-- Deletes node h, which has no keys and no children: the whole hash, or, for a block hash
-- (which may still hold its block key's object, K.obj), only the node's fields.
local function radix_drop_node(tag, h)
  if K.is_block(h) then
    redis.call('HDEL', K.node(tag, h), unpack(RADIX_NODE_FIELDS))
  else
    redis.call('DEL', K.node(tag, h))
  end
end

-- Whether object key exists (in its own hash or its block hash: a field every object has).
local function radix_object_exists(tag, key)
  return redis.call('HEXISTS', K.obj(tag, key), F.obj.put_id) == 1
end

-- How many keys are registered under node h.
local function radix_nkeys(tag, h)
  return tonumber(redis.call('HGET', K.node(tag, h), F.node.nkeys)) or 0
end

-- The keys registered under node h.
local function radix_keys(tag, h)
  local out = {}
  local flat = redis.call('HGETALL', K.node(tag, h))
  for i = 1, #flat, 2 do
    local c = string.sub(flat[i], 1, 1)
    if c == '.' then
      table.insert(out, h .. string.sub(flat[i], 2))
    elseif c == '/' then
      table.insert(out, string.sub(flat[i], 2))
    end
  end
  return out
end

-- Registers keys under node h; returns how many were not registered yet.
local function radix_add_keys(tag, h, keys)
  local nkey = K.node(tag, h)
  local added = 0
  for _, key in ipairs(keys) do
    added = added + redis.call('HSETNX', nkey, radix_key_field(h, key), '1')
  end
  if added > 0 then
    redis.call('HINCRBY', nkey, F.node.nkeys, added)
  end
  return added
end

-- Whether key is registered under node h.
local function radix_has_key(tag, h, key)
  return redis.call('HEXISTS', K.node(tag, h), radix_key_field(h, key)) == 1
end

-- 64 lowercase hex digits -> their 32 bytes, and back. Where the runtime has the struct library
-- (Redis), one struct.pack of five 6-byte words and a 2-byte one (12 hex digits are exact in a
-- double) and, back, one struct.unpack into one string.format: about 0.6 us each on Redis 7.0,
-- against 2.3 and 1.4 us for the arithmetic and bit.tohex forms below (fakeredis has neither
-- struct nor bit: those forms run there). A gsub with a byte table is cheaper once the table is
-- full, but a script's locals are made anew on every call: filling it cost a call about 7 us
-- (unhex) and 9-12 us (hex) for its first hash (docs/benchmarks.md, "Hex in Lua").
local radix_floor, radix_char, radix_byte = math.floor, string.char, string.byte
local radix_unhex32 = function(h)
  local b = {}
  for i = 1, 64, 8 do
    local v = tonumber(string.sub(h, i, i + 7), 16)
    local hi, lo = radix_floor(v / 65536), v % 65536
    local j = (i - 1) / 2
    b[j + 1], b[j + 2], b[j + 3], b[j + 4] = radix_floor(hi / 256), hi % 256, radix_floor(lo / 256), lo % 256
  end
  return radix_char(unpack(b))
end
local RADIX_HEX32 = string.rep('%02x', 32)
local radix_hex32 = function(x)
  return string.format(RADIX_HEX32, radix_byte(x, 1, 32))
end
if struct then
  local pack, unpack_words, fmt, sub = struct.pack, struct.unpack, string.format, string.sub
  local WORDS, HEX_WORDS = '>I6I6I6I6I6I2', string.rep('%012x', 5) .. '%04x'
  radix_unhex32 = function(h)
    return pack(WORDS, tonumber(sub(h, 1, 12), 16), tonumber(sub(h, 13, 24), 16),
      tonumber(sub(h, 25, 36), 16), tonumber(sub(h, 37, 48), 16), tonumber(sub(h, 49, 60), 16),
      tonumber(sub(h, 61, 64), 16))
  end
  radix_hex32 = function(x)
    return fmt(HEX_WORDS, unpack_words(WORDS, x)) -- the position unpack adds is not formatted
  end
elseif bit then
  local tohex = bit.tohex
  radix_hex32 = function(x)
    local w = {}
    for i = 1, 32, 4 do
      local b1, b2, b3, b4 = radix_byte(x, i, i + 3)
      w[#w + 1] = tohex(((b1 * 256 + b2) * 256 + b3) * 256 + b4, 8)
    end
    return table.concat(w)
  end
end
local radix_child_fields = {} -- memo of one script call: a put reads and writes each edge
-- Memo of radix_parent_hash, one script call: filled by it, and by every child field made or
-- recorded here (a chain put's next item has this one's block as its parent: no hex32 then);
-- radix_parent_hash fills radix_child_fields in turn. A field and its hash are one value
-- written two ways (keys.node_child_field), so either memo answers for the other.
local radix_parent_hashes = {}

-- The node HASH field of the edge to child c.
local function radix_child_field(c)
  local f = radix_child_fields[c]
  if f then
    return f
  end
  if #c == 64 and string.find(c, '^[0-9a-f]+$') then
    f = '>' .. radix_unhex32(c)
  else
    f = '<' .. c
  end
  radix_child_fields[c], radix_parent_hashes[f] = f, c
  return f
end

-- A caller that sends child c's edge field (keys.node_child_field, the same rule) records it.
local function radix_child_field_is(c, f)
  radix_child_fields[c], radix_parent_hashes[f] = f, c
end

-- The stored parent field p (schema 9): the parent hash in radix_child_field's form ('>' and
-- the 32 bytes of 64 lowercase hex digits, '<' and the hash otherwise), '' for none. 31 bytes
-- less per node than the hex digits; radix_parent_hash reads it back.
local function radix_parent_field(p)
  if p == '' then
    return ''
  end
  return radix_child_field(p)
end

-- The parent hash of a stored field p (false and '' as they are). radix_hex32 is about 2 us:
-- memoized per script call (radix_parent_hashes), as a walk up a chain (radix_chain) or an
-- eviction pass meets the same parents again; the put path compares stored forms instead (its
-- ARGV carries the parent so: lua_calls/puts.py).
local function radix_parent_hash(v)
  if not v or v == '' then
    return v
  end
  local x = radix_parent_hashes[v]
  if x then
    return x
  end
  if string.byte(v) == 62 then -- '>'
    x = radix_hex32(string.sub(v, 2))
    -- Both ways: the edge to x from its own parent (an eviction cascading up a chain, the
    -- parent's edge dropped next) then needs no radix_unhex32.
    radix_child_fields[x] = v
  else
    x = string.sub(v, 2)
  end
  radix_parent_hashes[v] = x
  return x
end

-- How many children node h has.
local function radix_nchildren(tag, h)
  return tonumber(redis.call('HGET', K.node(tag, h), F.node.nchildren)) or 0
end

-- The generation of the edge h -> c (a string), or false.
local function radix_child_gen(tag, h, c)
  return redis.call('HGET', K.node(tag, h), radix_child_field(c))
end

-- Sets the edge h -> c to generation gen.
local function radix_set_child(tag, h, c, gen)
  local nkey = K.node(tag, h)
  if redis.call('HSET', nkey, radix_child_field(c), gen) == 1 then
    redis.call('HINCRBY', nkey, F.node.nchildren, 1)
  end
end

-- The children of node h as a flat list: child, generation, child, generation, ...
local function radix_children(tag, h)
  local out = {}
  local flat = redis.call('HGETALL', K.node(tag, h))
  for i = 1, #flat, 2 do
    local c = string.sub(flat[i], 1, 1)
    if c == '>' then
      table.insert(out, radix_hex32(string.sub(flat[i], 2)))
      table.insert(out, flat[i + 1])
    elseif c == '<' then
      table.insert(out, string.sub(flat[i], 2))
      table.insert(out, flat[i + 1])
    end
  end
  return out
end

-- The tiered leaf policy (eviction/policy.py): the shard's stats hold the tier protections
-- ('F/X/Y' turnovers, written at start; absent: lru / lru-freq, the index is scored by s), the
-- turnover T and the logical clock (blocks evicted so far), both published by the evictor
-- after each pass. Read once per shard and script call.
local radix_tier_cache = {}
-- The parsed protections per offsets string: every shard holds the same one, parsed once.
local radix_tier_offsets = {}

-- Records the tier state of shard tag from its stats fields (offsets, turnover, clock: strings
-- or false) as a caller read them, so that radix_tier_state needs no read of its own.
local function radix_tier_prime(tag, offsets, turnover, clock)
  local st = false
  if offsets then
    local off = radix_tier_offsets[offsets]
    if not off then
      off = {}
      for v in string.gmatch(offsets, '[^/]+') do
        off[#off + 1] = tonumber(v) or 0
      end
      radix_tier_offsets[offsets] = off
    end
    st = { off = off, turnover = tonumber(turnover) or 0, clock = tonumber(clock) or 0 }
    st.clock_s = string.format('%d', st.clock)
  end
  radix_tier_cache[tag] = st
  return st
end

local function radix_tier_state(tag)
  local st = radix_tier_cache[tag]
  if st == nil then
    -- One HMGET whatever the policy (tiered, the default, needs all three; lru and lru-freq
    -- find the offsets absent and ignore the rest).
    local f = redis.call('HMGET', K.stats(tag), F.stats.tier_offsets, F.stats.turnover, F.stats.clock)
    st = radix_tier_prime(tag, f[1], f[2], f[3])
  end
  return st
end

-- string.format(fmt, x), memoized per script call (fmt: '%.17g' or '%d'): a value a call
-- writes many times (a shard's clock, the found-tier score, now + ttl, the leaf score of every
-- node a put makes) is formatted once; a '%.17g' printf costs Redis thousands of instructions.
local radix_fmt_memo = { ['%.17g'] = {}, ['%d'] = {} }
local function radix_fmt(fmt, x)
  local memo = radix_fmt_memo[fmt]
  local s = memo[x]
  if not s then
    s = string.format(fmt, x)
    memo[x] = s
  end
  return s
end

-- Number x as the string Redis stores for it ('%.17g').
local function radix_num(x)
  return radix_fmt('%.17g', x)
end

-- The tiered leaf score from a node's stamp, hits and exposed fields (strings or false) and
-- the shard's tier state st: the one place of the tier rule.
local function radix_tier_score(st, stamp, hits, exposed)
  local tier = 1
  if (tonumber(hits) or 0) > 0 then
    tier = 3
  elseif exposed == '1' then
    tier = 2
  end
  return (tonumber(stamp) or 0) + (st.off[tier] or 0) * st.turnover
end

-- The leaf index score of a node from its fields as a caller read them (strings or false):
-- score s unless the shard is tiered (st: radix_tier_state), else radix_tier_score.
local function radix_score_of(st, score, stamp, hits, exposed)
  if st then
    return radix_tier_score(st, stamp, hits, exposed)
  end
  return tonumber(score) or 0
end

-- The leaf index score of node h, for every index event: s (the newest lease timeout) unless
-- tiered; tiered: stamp k + the protection of the node's tier x T, tier found (h > 0), exposed
-- (x), fresh. A bonus over the stamp, bounded by the largest protection.
local function radix_leaf_score(tag, h)
  local st = radix_tier_state(tag)
  if not st then
    return tonumber(redis.call('HGET', K.node(tag, h), F.node.score)) or 0
  end
  local f = redis.call('HMGET', K.node(tag, h), F.node.stamp, F.node.hits, F.node.exposed)
  return radix_tier_score(st, f[1], f[2], f[3])
end

local function radix_zadd_leaf(tag, h, xx)
  local z = string.format('%.17g', radix_leaf_score(tag, h))
  if xx then
    redis.call('ZADD', K.leaves(tag), 'XX', z, h)
  else
    redis.call('ZADD', K.leaves(tag), z, h)
  end
end

local function radix_refresh_leaf(tag, h, nk, nc)
  nk = nk or radix_nkeys(tag, h) -- nk, nc (optional): the counts as the caller just read them
  nc = nc or radix_nchildren(tag, h)
  if nk > 0 and nc == 0 then
    radix_zadd_leaf(tag, h, false)
  else
    redis.call('ZREM', K.leaves(tag), h)
  end
end

-- A batch's deferred shard writes (radix_flush writes them): the node and key counters and the
-- leaf index entries, so that a put of many keys costs one HINCRBY / ZADD / ZREM per shard.
local function radix_acc()
  return { nodes = 0, rkeys = 0, leaf = {}, unleaf = {} }
end

local function radix_flush(tag, acc)
  if acc.nodes ~= 0 then
    redis.call('HINCRBY', K.stats(tag), F.stats.nodes, acc.nodes)
  end
  if acc.rkeys ~= 0 then
    redis.call('HINCRBY', K.stats(tag), F.stats.rkeys, acc.rkeys)
  end
  variadic('ZADD', K.leaves(tag), acc.leaf)
  variadic('ZREM', K.leaves(tag), acc.unleaf)
  acc.nodes, acc.rkeys, acc.leaf, acc.unleaf = 0, 0, {}, {}
end

-- now (ms, an integer) as a decimal string; the script's clock is one value, formatted once.
local radix_ms_memo = { n = nil, s = nil }
local function radix_ms(now)
  if radix_ms_memo.n ~= now then
    radix_ms_memo.n, radix_ms_memo.s = now, string.format('%d', now)
  end
  return radix_ms_memo.s
end

-- Creates node h if absent. With acc, the caller has seen that h does not exist (no EXISTS) and
-- the node counter goes to acc. extra (optional): more field, value pairs written in the same
-- HSET (a caller's first writes to the new node), after the defaults.
-- No hits field until the first hit and no link generation without a parent (schema 9: absent
-- is 0, radix_link_gen).
local function radix_create(tag, h, now, acc, extra, nextra)
  local nkey = K.node(tag, h)
  if not acc and radix_exists(tag, h) then
    return false
  end
  local ms = radix_ms(now)
  -- Tiered: the node's stamp (radix_tier_stamp) in the same HSET.
  local st = radix_tier_state(tag)
  if extra and st then
    redis.call('HSET', nkey, F.node.parent, '', F.node.parent_shard, '-1', F.node.created_ms, ms, F.node.score, ms, F.node.stamp, st.clock_s, unpack(extra, 1, nextra or #extra))
  elseif extra then
    redis.call('HSET', nkey, F.node.parent, '', F.node.parent_shard, '-1', F.node.created_ms, ms, F.node.score, ms, unpack(extra, 1, nextra or #extra))
  elseif st then
    redis.call('HSET', nkey, F.node.parent, '', F.node.parent_shard, '-1', F.node.created_ms, ms, F.node.score, ms, F.node.stamp, st.clock_s)
  else
    redis.call('HSET', nkey, F.node.parent, '', F.node.parent_shard, '-1', F.node.created_ms, ms, F.node.score, ms)
  end
  if acc then
    acc.nodes = acc.nodes + 1
  else
    redis.call('HINCRBY', K.stats(tag), F.stats.nodes, 1)
  end
  return true
end

-- Parent-side step of a link: the edge (creating a shell parent if needed). Returns its generation.
local function radix_link_edge(tag, parent, child, now)
  radix_create(tag, parent, now)
  local gen = now
  local old = radix_child_gen(tag, parent, child)
  if old and tonumber(old) >= gen then
    gen = tonumber(old) + 1
  end
  radix_set_child(tag, parent, child, gen)
  redis.call('ZREM', K.leaves(tag), parent)
  if radix_tier_state(tag) then
    redis.call('HSET', K.node(tag, parent), F.node.exposed, '1')
  end
  return gen
end

-- Whether a node's block is completely stored: it has registered keys and every one of them
-- is an object with all replicas COMPLETE (st = 'C'). Objects share the node's shard. skip
-- (optional): keys to leave out, as if not registered (put_start's keys new in its call: the
-- block as it was before the call).
local function radix_block_stored(tag, h, skip)
  local n = 0
  for _, k in ipairs(radix_keys(tag, h)) do
    if not (skip and skip[k]) then
      if redis.call('HGET', K.obj(tag, k), F.obj.status) ~= 'C' then
        return 0
      end
      n = n + 1
    end
  end
  return n > 0 and 1 or 0
end

-- Whether node parent's block is completely stored and the node is no orphan (a put under it
-- cannot make an orphan): nk and dot, its key count and '.' field as read; skip as
-- radix_block_stored's. For a node that exists.
local function radix_parent_stored(tag, parent, nk, dot, skip)
  local stored = 0
  if nk == '1' and dot then -- one key, the block hash itself (MLA): no key walk
    if not (skip and skip[parent]) then
      stored = redis.call('HGET', K.obj(tag, parent), F.obj.status) == 'C' and 1 or 0
    end
  else
    stored = radix_block_stored(tag, parent, skip)
  end
  if stored == 1 and redis.call('ZSCORE', K.orphans(tag), parent) then
    stored = 0
  end
  return stored
end

-- radix_parent_stored of node h, read here (one HMGET): 0 when h has no node. The put guard of
-- a put linked in its commit (put_start 'g', put_precheck), and a resent commit's stored flag.
local function radix_node_stored(tag, h, skip)
  local f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.nkeys, '.')
  return f[1] and radix_parent_stored(tag, h, f[2], f[3], skip) or 0
end

-- The parent side of one link parent -> child (cf: the child's edge field) in a call that
-- links several (radix_link's pairs; put_start's in-call links): adds the edge, creating a
-- shell parent if needed, and takes the parent out of the leaf index (acc.unleaf: the caller
-- flushes acc). seen holds the call's state per parent, so each parent is read once (one
-- HMGET): whether its block is stored and not an orphan, whether it is rooted (linking changes
-- neither), the generations this call gave its edges, its child count, exposed. Per pair one
-- HSET: the edge, the child count when the edge is new, tiered (exposing): the parent
-- exposed. Returns the link generation (a number), stored (0/1) and rooted (0/1). skip
-- (optional): keys stored is judged without (radix_block_stored).
local function radix_link_pair(tag, parent, child, cf, seen, acc, exposing, now, skip)
  radix_child_field_is(child, cf)
  local p = seen[parent]
  local gen = now
  local old = nil -- the edge's last generation (nil: a new edge)
  local write = true
  if not p then
    local f = redis.call('HMGET', K.node(tag, parent), F.node.parent, F.node.nkeys, '.', F.node.exposed, F.node.nchildren, cf)
    local pp = f[1]
    local stored = pp and radix_parent_stored(tag, parent, f[2], f[3], skip) or 0
    -- kids: the generations this call gave the parent's edges; a parent created here has no
    -- other edge, so its edges' last generations need no read.
    p = { stored, (not pp or pp == '') and 1 or 0, kids = {}, fresh = not pp,
      nc = tonumber(f[5]) or 0, exposed = f[4] == '1' }
    seen[parent] = p
    if pp then
      table.insert(acc.unleaf, parent) -- a new node is in no index yet
      old = tonumber(f[6])
    else
      -- A new parent and its first edge (generation now) in one HSET.
      local w = { cf, radix_ms(gen), F.node.nchildren, '1' }
      if exposing then
        w[5], w[6] = F.node.exposed, '1'
      end
      radix_create(tag, parent, now, acc, w)
      p.nc, p.exposed, write = 1, true, false
    end
  else
    if p.leaf then -- seeded (radix_link_seed): its pending leaf entry is dropped, not undone
      acc.drop[parent] = true
      p.leaf = nil
    end
    old = p.kids[child]
    if not old and not p.fresh then
      old = tonumber(radix_child_gen(tag, parent, child))
    end
  end
  if write then
    -- The edge: a generation above the edge's last one (radix_link_edge, less its reads).
    if old and old >= gen then
      gen = old + 1
    end
    local w = { cf, gen }
    if not old then
      p.nc = p.nc + 1
      w[3], w[4] = F.node.nchildren, p.nc
    end
    if exposing and not p.exposed then
      w[#w + 1], w[#w + 2] = F.node.exposed, '1'
      p.exposed = true
    end
    redis.call('HSET', K.node(tag, parent), unpack(w))
  end
  p.kids[child] = gen
  return gen, p[1], p[2]
end

-- Records in seen (radix_link_pair's) node h that this call created with a put of its block
-- (status P: not stored; no edge, no child, not exposed; in acc.leaf): a child linked to it
-- later in the call needs no read of it, and its leaf entry, not written yet, is dropped
-- (acc.drop: a caller that seeds filters acc.leaf by it at its flush) instead of added and
-- removed.
-- rooted: h was made without a parent.
local function radix_link_seed(seen, h, rooted)
  seen[h] = { 0, rooted and 1 or 0, kids = {}, fresh = true, nc = 0, exposed = false, leaf = true }
end

-- Code of a child-side step that must not run before the caller checked that the new parent
-- is not a descendant of the node (a positive number: never a Mooncake code).
local RADIX_CHECK_CYCLE = 1

-- Whether giving node h (in shard tag) the parent `parent` needs that cycle check first: h
-- already exists without a parent and has children (only then can the parent be below it).
local function radix_needs_cycle_check(tag, h, parent)
  if parent == '' then
    return false
  end
  local cur = redis.call('HGET', K.node(tag, h), F.node.parent)
  return cur == '' and radix_nchildren(tag, h) > 0
end

-- Whether the keys of shard tag ptag live on this node. On a cluster a script may touch only
-- local slots; redis.pcall turns the refusal into an error reply instead of aborting.
local radix_local_cache = {}
local function radix_local(ptag)
  local yes = radix_local_cache[ptag]
  if yes == nil then -- asked once per shard and script call (slots do not move during one)
    local r = redis.pcall('EXISTS', K.stats(ptag))
    yes = type(r) ~= 'table' or r.err == nil
    radix_local_cache[ptag] = yes
  end
  return yes
end

-- A caller that has just read shard ptag's keys (so they are on this node) records it.
local function radix_local_is(ptag)
  radix_local_cache[ptag] = true
end

-- A node's link generation from its stored fields p, g and t (schema 9): g is absent when the
-- edge was made with the node (its generation is then the node's created ms t: 12 bytes less
-- per node, radix_attach); a node without a parent has generation '0'.
local function radix_link_gen(p, g, t)
  if g then
    return g
  end
  if p and p ~= '' then
    return t
  end
  return '0'
end

-- What radix_attach reads of node h: {parent as stored (radix_parent_field; false: no node), leaf score, link generation, om,
-- children count, tier stamp, hits, exposed} (the last three: its tiered leaf score, no read). A caller that checks the node before its own writes (put_start) reads it
-- once and passes it to radix_attach. With key (the one key the caller will attach), also
-- whether key is registered and the key count (f[9], and f[RADIX_PRE_KF], f[RADIX_PRE_NK] with
-- the key at f[RADIX_PRE_KEY]; without key, f[RADIX_PRE_KF] is nil): radix_attach then writes
-- the node in one HSET instead of HSETNX + HINCRBY.
local RADIX_PRE_KEY, RADIX_PRE_KF, RADIX_PRE_NK = 11, 12, 13 -- radix_pre's key slots (f[9]: has)
-- radix_pre's slots of the created ms t and of g as stored (false: absent, radix_link_gen)
local RADIX_PRE_T, RADIX_PRE_G = 14, 15
-- extra (optional, with key): more fields of the same hash read by the same HMGET (a block
-- key's object fields: K.obj(tag, key) is the block hash when key is its own prefix); their
-- values are returned second, in a table of their own.
local RADIX_NO_FIELDS = {}
local function radix_pre(tag, h, key, extra)
  local f, x, t
  if key then
    local kf = radix_key_field(h, key)
    f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.score, F.node.link_gen, 'om', F.node.nchildren, F.node.stamp, F.node.hits, F.node.exposed, kf, F.node.nkeys, F.node.created_ms, unpack(extra or RADIX_NO_FIELDS))
    t = f[11]
    if extra then
      x = {}
      for i = 1, #extra do
        x[i] = f[11 + i]
        f[11 + i] = nil
      end
    end
    -- in the reply's own array slots (its part is 16 long after 11 replies): no hash part
    f[RADIX_PRE_KEY], f[RADIX_PRE_KF], f[RADIX_PRE_NK] = key, kf, tonumber(f[10]) or 0
  else
    f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.score, F.node.link_gen, 'om', F.node.nchildren, F.node.stamp, F.node.hits, F.node.exposed, F.node.created_ms)
    t = f[9]
    f[9] = nil
  end
  f[RADIX_PRE_T], f[RADIX_PRE_G] = t, f[3]
  f[3] = radix_link_gen(f[1], f[3], t)
  f[5] = f[1] and (tonumber(f[5]) or 0) or 0
  return f, x
end

-- Child-side step: record the parent (if known) and add keys. Returns code, message; the code
-- is RADIX_CHECK_CYCLE (nothing written) when the parent could close a cycle and the caller has
-- not checked it yet (checked ~= 1). acc (optional, see radix_acc): counters and leaf entries are
-- deferred to the caller's radix_flush. pre (optional): radix_pre(tag, h), read by the caller
-- after its own last write to h. extra, nextra (optional): a table whose first nextra entries
-- are more field/value pairs of the hash (a block key's object fields: put_start), written by
-- the node's one HSET (made then even when the node itself changes nothing); the node's pairs
-- are appended to that table.
local function radix_attach(tag, h, parent, pshard, gen, keys, now, checked, acc, pre, extra, nextra)
  -- parent: as the node stores it (radix_parent_field; the caller's ARGV carries it so)
  local nkey = K.node(tag, h)
  local f = pre or radix_pre(tag, h)
  local cur = f[1]
  if cur and cur ~= '' and parent ~= '' and cur ~= parent then
    return E.INVALID_PARAMS, 'parent_prefix_hash: node ' .. h .. ' already has parent ' .. radix_parent_hash(cur)
  end
  -- The node exists without a parent and has children: only then can the parent be below it.
  if checked ~= 1 and parent ~= '' and cur == '' and f[5] > 0 then
    return RADIX_CHECK_CYCLE, 'parent cycle check needed'
  end
  local own = acc or radix_acc()
  local score = tonumber(f[2]) or 0
  -- The node's writes in one HSET: the parent fields if they change and, when pre read the one
  -- key (f.kf), its registration and the key count.
  -- (with extra, the node's pairs go after the caller's in its own table: no copy)
  local w, n = extra or { false, false, false, false, false, false, false, false, false, false }, extra and nextra or 0
  -- The same parent: its generation only rises (a sibling key's older link, sent after a newer
  -- one was adopted, must not lower it below the edge's).
  if parent ~= '' and (cur ~= parent or (tonumber(gen) or 0) > (tonumber(f[3]) or 0)) then
    -- linked in the ms the node was made (the common case: a put's link step made it as a
    -- parent, or the put makes it now) and no g stored: none (radix_link_gen)
    if not f[RADIX_PRE_G] and tostring(gen) == (cur and f[RADIX_PRE_T] or radix_ms(now)) then
      w[n + 1], w[n + 2], w[n + 3], w[n + 4], n = F.node.parent, parent, F.node.parent_shard, pshard, n + 4
    else
      w[n + 1], w[n + 2], w[n + 3], w[n + 4], w[n + 5], w[n + 6], n = F.node.parent, parent, F.node.parent_shard, pshard, F.node.link_gen, gen, n + 6
    end
  end
  local kf = f[RADIX_PRE_KF]
  local one = kf and #keys == 1 and keys[1] == f[RADIX_PRE_KEY]
  if one and not f[9] then
    w[n + 1], w[n + 2], w[n + 3], w[n + 4], n = kf, '1', F.node.nkeys, string.format('%d', f[RADIX_PRE_NK] + 1), n + 4
    own.rkeys = own.rkeys + 1
  end
  local st = radix_tier_state(tag)
  if not cur then
    radix_create(tag, h, now, own, w, n)
    score = now
    if st then -- a new node: stamped now, no hits, not exposed
      score = radix_num(radix_tier_score(st, st.clock, '0', false))
    end
  else
    if n > 0 then
      redis.call('HSET', nkey, unpack(w, 1, n))
    end
    if st then -- attach writes none of the fields the tier score reads
      score = string.format('%.17g', radix_tier_score(st, f[6], f[7], f[8]))
    end
  end
  if not one then
    own.rkeys = own.rkeys + radix_add_keys(tag, h, keys)
  end
  -- The leaf index: the node has keys and no children (attach changes neither children nor,
  -- with keys to add, the emptiness of the key set).
  if #keys == 0 then
    radix_refresh_leaf(tag, h)
  elseif f[5] == 0 then
    table.insert(own.leaf, score)
    table.insert(own.leaf, h)
  else
    table.insert(own.unleaf, h)
  end
  if not acc then
    radix_flush(tag, own)
  end
  return E.OK, ''
end

-- Whether any key registered under node h has an object (a stored block, for the orphan rule).
local function radix_has_object(tag, h)
  for _, k in ipairs(radix_keys(tag, h)) do
    if radix_object_exists(tag, k) then
      return true
    end
  end
  return false
end

-- Orphan marks for h's children: op 'orphan' (h lost its last object) or 'adopt' (h has one
-- again). Children in this shard are marked here, the others through continuations.
local function radix_mark_children(tag, shard, h, op, conts, now)
  local flat = radix_children(tag, h)
  for i = 1, #flat, 2 do
    table.insert(conts, { flat[i], '-1', '', op })
  end
end

-- The target side of an orphan mark continuation.
local function radix_mark(tag, h, op, now)
  if op == 'orphan' then
    if radix_exists(tag, h) then
      redis.call('ZADD', K.orphans(tag), 'NX', now, h)
    end
  else
    redis.call('ZREM', K.orphans(tag), h)
  end
end

-- After node h lost a stored object: if it has children and no object left, mark them (and
-- note on h, field om, that its children are marked: a put that stores h again adopts them).
local function radix_lost_object(tag, shard, h, conts, now)
  if radix_exists(tag, h)
      and radix_nchildren(tag, h) > 0
      and not radix_has_object(tag, h) then
    radix_mark_children(tag, shard, h, 'orphan', conts, now)
    redis.call('HSET', K.node(tag, h), 'om', '1')
  end
end

-- Before a put stores an object in node h: whether h's children were marked as orphans (and
-- h has no object yet), so that the put adopts them.
local function radix_will_adopt(tag, h)
  if redis.call('HGET', K.node(tag, h), 'om') ~= '1' then
    return false
  end
  redis.call('HDEL', K.node(tag, h), 'om')
  return not radix_has_object(tag, h)
end

-- Drops the edge p -> c of generation gen from node p, in one read of p (the edge, its counts
-- and its score fields): p then stays with its leaves entry refreshed as radix_refresh_leaf
-- would, or has no key and no child left. Returns 0 (no such edge: nothing written), 1 (p
-- stays) or 2 (p is empty: the caller collapses it).
local function radix_drop_edge(tag, p, c, gen)
  local nkey = K.node(tag, p)
  local cf = radix_child_field(c)
  local f = redis.call('HMGET', nkey, cf, F.node.created_ms, F.node.nkeys, F.node.nchildren,
    F.node.score, F.node.stamp, F.node.hits, F.node.exposed)
  if not f[1] or (f[1] ~= gen and tonumber(f[1]) ~= tonumber(gen)) then -- equal text: no strtod
    return 0
  end
  local nk, nc = tonumber(f[3]) or 0, (tonumber(f[4]) or 0) - 1
  if nc <= 0 then -- the count goes with the last edge
    redis.call('HDEL', nkey, cf, F.node.nchildren)
    nc = 0
  else
    redis.call('HDEL', nkey, cf)
    redis.call('HINCRBY', nkey, F.node.nchildren, -1)
  end
  if not f[2] then -- no node (an edge left in a hash without one): nothing to refresh
    return 1
  end
  if nk == 0 and nc == 0 then
    return 2
  end
  if nk > 0 and nc == 0 then -- radix_zadd_leaf, from the fields just read
    local z = radix_score_of(radix_tier_state(tag), f[5], f[6], f[7], f[8])
    redis.call('ZADD', K.leaves(tag), string.format('%.17g', z), p)
  else
    redis.call('ZREM', K.leaves(tag), p)
  end
  return 1
end

-- After node h was dropped: its edge from its parent goes. f: h's parent, parent shard, link
-- generation and created ms as h stored them. A parent in another shard gets a continuation
-- (appended to conts); one in this shard loses the edge here when its generation matches
-- (radix_drop_edge), and is returned when it is left empty (the caller collapses it). Returns
-- nil otherwise.
local function radix_unlink_parent(tag, shard, h, f, conts)
  local p, ps, g = radix_parent_hash(f[1]), tonumber(f[2]), radix_link_gen(f[1], f[3], f[4])
  if not p or p == '' then
    return nil
  end
  if ps ~= shard then
    table.insert(conts, { p, tostring(ps), h, g })
    return nil
  end
  if radix_drop_edge(tag, p, h, g) == 2 then
    return p
  end
  return nil
end

-- Deletes h if it has no keys and no children, then walks up while the parent is in this shard.
-- One HMGET per level: whether the node exists (t), its counts and its parent edge.
local function radix_collapse(tag, shard, h, conts)
  local guard = 0
  while h and guard < 1000000 do
    guard = guard + 1
    local f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.parent_shard,
      F.node.link_gen, F.node.created_ms, F.node.nkeys, F.node.nchildren)
    if not f[4] then
      return
    end
    local nk, nc = tonumber(f[5]) or 0, tonumber(f[6]) or 0
    if nk > 0 or nc > 0 then
      radix_refresh_leaf(tag, h, nk, nc)
      return
    end
    radix_drop_node(tag, h)
    redis.call('ZREM', K.leaves(tag), h)
    redis.call('ZREM', K.orphans(tag), h)
    redis.call('HINCRBY', K.stats(tag), F.stats.nodes, -1)
    h = radix_unlink_parent(tag, shard, h, f, conts)
  end
end

-- Removes one registered key from its node; cascades through empty shells.
local function radix_remove_key(tag, shard, h, key, conts)
  local nkey = K.node(tag, h)
  if redis.call('HDEL', nkey, radix_key_field(h, key)) == 0 then
    return 0
  end
  if redis.call('HINCRBY', nkey, F.node.nkeys, -1) <= 0 then
    redis.call('HDEL', nkey, F.node.nkeys)
  end
  redis.call('HINCRBY', K.stats(tag), F.stats.rkeys, -1)
  radix_collapse(tag, shard, h, conts)
  return 1
end

-- Parent-side step of an unlink: drop the edge if its generation matches, then cascade.
-- (An orphan mark continuation, gen 'orphan' / 'adopt', marks the node `parent` instead.)
local function radix_unlink_edge(tag, shard, parent, child, gen, conts)
  if gen == 'orphan' or gen == 'adopt' then
    radix_mark(tag, parent, gen, now_ms())
    return 0
  end
  local dropped = radix_drop_edge(tag, parent, child, gen)
  if dropped == 2 then
    radix_collapse(tag, shard, parent, conts)
  end
  return dropped == 0 and 0 or 1
end

-- The later of two times in ms given as decimal strings without sign or leading zeros (how
-- leases, soft pins and node scores are stored and computed here); a (a stored field) may be
-- false. Strings compared by length, then lexically: no tonumber, and the winner goes back to
-- Redis as it is (no number formatting).
local function radix_ms_max(a, b)
  if not a then
    return b
  end
  local la, lb = #a, #b
  if la ~= lb then
    return la > lb and a or b
  end
  return a >= b and a or b
end

-- The node fields a touch reads: the leaf score's input, the hit counter and the children count
-- (a node with children is not in the leaf index: no ZADD for it); tiered, also the stamp (not
-- rewritten when already the clock). Not the exposed mark: a touched node has hits, and the
-- found tier does not depend on it.
local RADIX_TOUCH_FIELDS = { F.node.score, F.node.hits, F.node.nchildren }
local RADIX_TOUCH_TIER_FIELDS = { F.node.score, F.node.hits, F.node.nchildren, F.node.stamp }

-- A node's leaf score after a lease grant on one of its keys, from its score s (false: none)
-- and the lease (decimal strings): the newest lease (lease order, as Mooncake's eviction).
-- The one place of the rule.
local function radix_touch_score(s, lease)
  return radix_ms_max(s, lease)
end

-- Lease grants on keys of the radix nodes of one shard, one entry per node {hash, newest lease
-- (a decimal string), grants}: the node's score follows (radix_touch_score), its hits count the
-- grants (for frequency-aware policies; tiered: its stamp becomes the clock), in one HSET of
-- the fields that change, and one ZADD XX moves those that are leaves (no children) in the leaf
-- index (its score: the node's s, or tiered its tier score: the found tier, the same for every
-- node touched now, computed once). Two calls per node (HMGET, HSET), at most one per shard
-- (none without nodes: not even the tier state is read). A node entry with t.g (a block key's
-- HMGET of its block hash: the node's fields at t.nb + 1) is not read again, and its object's
-- grant (t.l, t.sp: the new lease and soft pin, or false) goes in the node's HSET.
local function radix_touch(tag, nodes)
  if #nodes == 0 then
    return
  end
  local leaves = {}
  local w = { false, false, false, false, false, false, false, false, false, false } -- reused
  local tiered = radix_tier_state(tag)
  local fields, clock, found = RADIX_TOUCH_FIELDS, nil, nil
  if tiered then -- found now: a new stamp, and the leaf scored by its tier (hits > 0: found)
    fields, clock = RADIX_TOUCH_TIER_FIELDS, radix_num(tiered.clock)
    found = radix_num(radix_tier_score(tiered, tiered.clock, 1, false))
  end
  for _, t in ipairs(nodes) do
    local g, o = t.g, t.nb -- a block key's read (store_grant_leases): the node's fields at o + 1
    local nkey, f1, f2, f3, f4 -- the node's score, hits, child count, stamp
    if g then
      nkey, f1, f2, f3, f4 = t.okey, g[o + 1], g[o + 2], g[o + 3], g[o + 4]
    else
      nkey = K.node(tag, t[1])
      local f = redis.call('HMGET', nkey, unpack(fields))
      f1, f2, f3, f4 = f[1], f[2], f[3], f[4]
    end
    local node = f1 or f2 -- radix_create writes both; neither: no node
    local s, hits, restamp
    if node then
      s = radix_touch_score(f1, t[2])
      -- as a string: a Lua number in a call costs Redis a %.17g snprintf
      hits = string.format('%d', (tonumber(f2) or 0) + t[3])
      restamp = clock and f4 ~= clock -- only the fields that change are written
    end
    if g then -- one HSET of the block hash: the object's grant (t.l, t.sp) and the node's
      local n = 0 -- w's first n entries are this node's (unpack(w, 1, n))
      if node then
        w[1], w[2], n = F.node.hits, hits, 2
        if s ~= f1 then
          w[3], w[4], n = F.node.score, s, 4
        end
        if restamp then
          w[n + 1], w[n + 2], n = F.node.stamp, clock, n + 2
        end
      end
      if t.l then
        w[n + 1], w[n + 2], n = F.obj.lease_ms, t.l, n + 2
      end
      if t.sp then
        w[n + 1], w[n + 2], n = F.obj.soft_pin_ms, t.sp, n + 2
      end
      if n > 0 then
        redis.call('HSET', nkey, unpack(w, 1, n))
      end
    elseif node then
      if s ~= f1 then
        if restamp then
          redis.call('HSET', nkey, F.node.score, s, F.node.hits, hits, F.node.stamp, clock)
        else
          redis.call('HSET', nkey, F.node.score, s, F.node.hits, hits)
        end
      elseif restamp then
        redis.call('HSET', nkey, F.node.hits, hits, F.node.stamp, clock)
      else
        redis.call('HSET', nkey, F.node.hits, hits)
      end
    end
    if node and (f3 == '0' or not f3) then -- a leaf
      leaves[#leaves + 1] = found or s
      leaves[#leaves + 1] = t[1]
    end
  end
  zadd_pairs(K.leaves(tag), 'XX', leaves)
end
