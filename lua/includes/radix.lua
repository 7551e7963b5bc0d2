-- Radix-tree node maintenance inside ONE shard (tag). Needs keys.lua, errors.lua, common.lua.
--
-- Node HASH fields: p parent hash ('' = unknown/root), ps parent shard (-1 = none), g link
-- generation of the edge parent->node, t created (ms), s leaf score, h hits, om '1' while its
-- children are marked as orphans; with the tiered leaf policy also k logical stamp, x '1' once
-- it had a child (radix_tier_*).
-- Children ZSET: child hash -> link generation. A node is in the leaves index exactly when it has
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

-- The tiered leaf policy (eviction/policy.py): the shard's stats hold the tier protections
-- ('F/X/Y' turnovers, written at start; absent: lru / lru-freq, the index is scored by s), the
-- turnover T and the logical clock (blocks evicted so far), both published by the evictor
-- after each pass. Read once per shard and script call.
local radix_tier_cache = {}
local function radix_tier_state(tag)
  local st = radix_tier_cache[tag]
  if st == nil then
    local f = redis.call('HMGET', K.stats(tag), F.stats.tier_offsets, F.stats.turnover, F.stats.clock)
    st = false
    if f[1] then
      local off = {}
      for v in string.gmatch(f[1], '[^/]+') do
        table.insert(off, tonumber(v) or 0)
      end
      st = { off = off, turnover = tonumber(f[2]) or 0, clock = tonumber(f[3]) or 0 }
    end
    radix_tier_cache[tag] = st
  end
  return st
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
  local tier = 1
  if (tonumber(f[2]) or 0) > 0 then
    tier = 3
  elseif f[3] == '1' then
    tier = 2
  end
  return (tonumber(f[1]) or 0) + (st.off[tier] or 0) * st.turnover
end

-- Tiered: node h was put or found now (its stamp becomes the logical clock).
local function radix_tier_stamp(tag, h)
  local st = radix_tier_state(tag)
  if st then
    redis.call('HSET', K.node(tag, h), F.node.stamp, st.clock)
  end
end

local function radix_zadd_leaf(tag, h, xx)
  local z = string.format('%.17g', radix_leaf_score(tag, h))
  if xx then
    redis.call('ZADD', K.leaves(tag), 'XX', z, h)
  else
    redis.call('ZADD', K.leaves(tag), z, h)
  end
end

local function radix_refresh_leaf(tag, h)
  local nk = redis.call('SCARD', K.node_keys(tag, h))
  local nc = redis.call('ZCARD', K.node_children(tag, h))
  if nk > 0 and nc == 0 then
    radix_zadd_leaf(tag, h, false)
  else
    redis.call('ZREM', K.leaves(tag), h)
  end
end

local function radix_create(tag, h, now)
  local nkey = K.node(tag, h)
  if redis.call('EXISTS', nkey) == 1 then
    return false
  end
  redis.call('HSET', nkey, F.node.parent, '', F.node.parent_shard, '-1', F.node.link_gen, '0', F.node.created_ms, now, F.node.score, now, F.node.hits, '0')
  radix_tier_stamp(tag, h)
  redis.call('SADD', K.nodes(tag), h)
  redis.call('HINCRBY', K.stats(tag), F.stats.nodes, 1)
  return true
end

-- Parent-side step of a link: the edge (creating a shell parent if needed). Returns its generation.
local function radix_link_edge(tag, parent, child, now)
  radix_create(tag, parent, now)
  local ckey = K.node_children(tag, parent)
  local gen = now
  local old = redis.call('ZSCORE', ckey, child)
  if old and tonumber(old) >= gen then
    gen = tonumber(old) + 1
  end
  redis.call('ZADD', ckey, gen, child)
  redis.call('ZREM', K.leaves(tag), parent)
  if radix_tier_state(tag) then
    redis.call('HSET', K.node(tag, parent), F.node.exposed, '1')
  end
  return gen
end

-- Whether a node's block is completely stored: it has registered keys and every one of them
-- is an object with all replicas COMPLETE (st = 'C'). Objects share the node's shard.
local function radix_block_stored(tag, h)
  local keys = redis.call('SMEMBERS', K.node_keys(tag, h))
  if #keys == 0 then
    return 0
  end
  for _, k in ipairs(keys) do
    if redis.call('HGET', K.obj(tag, k), F.obj.status) ~= 'C' then
      return 0
    end
  end
  return 1
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
  return cur == '' and redis.call('ZCARD', K.node_children(tag, h)) > 0
end

-- Whether the keys of shard tag ptag live on this node. On a cluster a script may touch only
-- local slots; redis.pcall turns the refusal into an error reply instead of aborting.
local function radix_local(ptag)
  local r = redis.pcall('EXISTS', K.stats(ptag))
  return type(r) ~= 'table' or r.err == nil
end

-- Child-side step: record the parent (if known) and add keys. Returns code, message; the code
-- is RADIX_CHECK_CYCLE (nothing written) when the parent could close a cycle and the caller has
-- not checked it yet (checked ~= 1).
local function radix_attach(tag, h, parent, pshard, gen, keys, now, checked)
  local nkey = K.node(tag, h)
  local cur = redis.call('HGET', nkey, F.node.parent)
  if cur and cur ~= '' and parent ~= '' and cur ~= parent then
    return E.INVALID_PARAMS, 'parent_prefix_hash: node ' .. h .. ' already has parent ' .. cur
  end
  if checked ~= 1 and radix_needs_cycle_check(tag, h, parent) then
    return RADIX_CHECK_CYCLE, 'parent cycle check needed'
  end
  radix_create(tag, h, now)
  if parent ~= '' then
    redis.call('HSET', nkey, F.node.parent, parent, F.node.parent_shard, pshard, F.node.link_gen, gen)
  end
  local added = 0
  for _, key in ipairs(keys) do
    added = added + redis.call('SADD', K.node_keys(tag, h), key)
  end
  if added > 0 then
    redis.call('HINCRBY', K.stats(tag), F.stats.rkeys, added)
  end
  radix_refresh_leaf(tag, h)
  return E.OK, ''
end

-- Whether any key registered under node h has an object (a stored block, for the orphan rule).
local function radix_has_object(tag, h)
  for _, k in ipairs(redis.call('SMEMBERS', K.node_keys(tag, h))) do
    if redis.call('EXISTS', K.obj(tag, k)) == 1 then
      return true
    end
  end
  return false
end

-- Orphan marks for h's children: op 'orphan' (h lost its last object) or 'adopt' (h has one
-- again). Children in this shard are marked here, the others through continuations.
local function radix_mark_children(tag, shard, h, op, conts, now)
  for _, c in ipairs(redis.call('ZRANGE', K.node_children(tag, h), 0, -1)) do
    table.insert(conts, { c, '-1', '', op })
  end
end

-- The target side of an orphan mark continuation.
local function radix_mark(tag, h, op, now)
  if op == 'orphan' then
    if redis.call('EXISTS', K.node(tag, h)) == 1 then
      redis.call('ZADD', K.orphans(tag), 'NX', now, h)
    end
  else
    redis.call('ZREM', K.orphans(tag), h)
  end
end

-- After node h lost a stored object: if it has children and no object left, mark them (and
-- note on h, field om, that its children are marked: a put that stores h again adopts them).
local function radix_lost_object(tag, shard, h, conts, now)
  if redis.call('EXISTS', K.node(tag, h)) == 1
      and redis.call('ZCARD', K.node_children(tag, h)) > 0
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

-- Deletes h if it has no keys and no children, then walks up while the parent is in this shard.
local function radix_collapse(tag, shard, h, conts)
  local guard = 0
  while h and guard < 1000000 do
    guard = guard + 1
    local nkey = K.node(tag, h)
    if redis.call('EXISTS', nkey) == 0 then
      return
    end
    if redis.call('SCARD', K.node_keys(tag, h)) > 0
        or redis.call('ZCARD', K.node_children(tag, h)) > 0 then
      radix_refresh_leaf(tag, h)
      return
    end
    local f = redis.call('HMGET', nkey, F.node.parent, F.node.parent_shard, F.node.link_gen)
    redis.call('DEL', nkey)
    redis.call('SREM', K.nodes(tag), h)
    redis.call('ZREM', K.leaves(tag), h)
    redis.call('ZREM', K.orphans(tag), h)
    redis.call('HINCRBY', K.stats(tag), F.stats.nodes, -1)
    local p, ps, g = f[1], tonumber(f[2]), f[3]
    if not p or p == '' then
      return
    end
    if ps ~= shard then
      table.insert(conts, { p, tostring(ps), h, g })
      return
    end
    local sc = redis.call('ZSCORE', K.node_children(tag, p), h)
    if not sc or tonumber(sc) ~= tonumber(g) then
      return
    end
    redis.call('ZREM', K.node_children(tag, p), h)
    h = p
  end
end

-- Removes one registered key from its node; cascades through empty shells.
local function radix_remove_key(tag, shard, h, key, conts)
  if redis.call('SREM', K.node_keys(tag, h), key) == 0 then
    return 0
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
  local sc = redis.call('ZSCORE', K.node_children(tag, parent), child)
  if not sc or tonumber(sc) ~= tonumber(gen) then
    return 0
  end
  redis.call('ZREM', K.node_children(tag, parent), child)
  radix_collapse(tag, shard, parent, conts)
  return 1
end

-- A lease grant on one of the node's keys: the node's leaf score follows the newest lease
-- (lease order, as Mooncake's eviction), hits count accesses for frequency-aware policies.
local function radix_touch(tag, h, lease_timeout)
  local nkey = K.node(tag, h)
  if redis.call('EXISTS', nkey) == 0 then
    return
  end
  local s = tonumber(redis.call('HGET', nkey, F.node.score)) or 0
  if lease_timeout > s then
    s = lease_timeout
    redis.call('HSET', nkey, F.node.score, s)
  end
  redis.call('HINCRBY', nkey, F.node.hits, 1)
  if radix_tier_state(tag) then
    radix_tier_stamp(tag, h)
    radix_zadd_leaf(tag, h, true)
  else
    redis.call('ZADD', K.leaves(tag), 'XX', s, h)
  end
end
