-- Object store helpers inside ONE object shard (tag). Includes what it needs (below).
-- Field names: F.obj (fields.lua, from keys.HASH_FIELDS); the short names stored:
--
-- Object HASH fields: c the client's ref in the shard's client table (K.cids: ref -> client id,
-- '=' .. client id -> ref, '#' the last ref; an entry never changes once written), t put start ms, sz size, l lease timeout ms, sp soft pin timeout
-- ms (absent = no soft pin), hp '1' hard pinned, st 'P'/'C', pid put id, pfx prefix hash,
-- rad '1' registered in the radix index ('2': and sp, hp, pfx or pl present), r replicas.
-- r, the replica record (records.py decodes the same format): replicas joined by ';', each
-- "id,st,ref,off,len": id decimal, st 'P'/'C', ref the segment's number in the shard's segment
-- table, off and len u64 hex without leading zeros. The segment table (HASH {<ns>:<i>}:segs)
-- maps ref -> cjson [seg, base, ep, proto, name] and '=' .. that cjson -> ref ('#' counts);
-- an entry never changes once written (a segment mounted again with other fields gets a new
-- ref), so readers may cache it. This keeps r short (one replica about 20 bytes) and the object
-- HASH listpack-encoded under Redis's defaults (values <= 64 bytes).
-- Lua sees a replica as {id, st, seg, off, len (16 hex), base, ep, proto, name, ref}.
-- sz (the object's size) is a decimal string; no 64-bit value is ever a Lua or cjson number.
-- A buffer free is the string "segment id|offset|put id"; it goes to the shard outbox (applied
-- by outbox drains, idempotently) or, for a discarded stale put, to the discarded ZSET with its
-- release time (moved to the outbox by the janitor once due).
--!include common.lua
--!include u64.lua
--!include radix.lua

-- The radix prefix of object key from its fields pfx and pl (strings or false; keys.py).
local function store_prefix(key, pfx, pl)
  if pfx then
    return pfx
  elseif pl then
    return string.sub(key, 1, tonumber(pl))
  end
  return key
end

-- Writes into fields after its first n entries the object fields that record prefix for key
-- (none when it is the key). Returns the new count (fields may be pre-sized: not #fields).
local function store_prefix_fields(key, prefix, fields, n)
  if prefix == key then
    return n
  elseif string.sub(key, 1, #prefix) == prefix then
    fields[n + 1], fields[n + 2] = F.obj.prefix_len, string.format('%d', #prefix)
  else
    fields[n + 1], fields[n + 2] = F.obj.prefix, prefix
  end
  return n + 2
end

-- Every object field (F.obj's stored names), sorted: what a block key's object is in its block hash.
local store_obj_fields = nil

-- Deletes object key's fields (okey = K.obj(tag, key)): its own hash, or in a block hash only
-- the object's fields (the node's stay: radix_drop_node deletes those).
local function store_drop(okey, key)
  if not K.is_block(key) then
    redis.call('DEL', okey)
    return
  end
  if not store_obj_fields then
    store_obj_fields = {}
    for _, v in pairs(F.obj) do
      store_obj_fields[#store_obj_fields + 1] = v
    end
    table.sort(store_obj_fields)
  end
  redis.call('HDEL', okey, unpack(store_obj_fields))
end

-- A buffer's entry in the outbox and the discarded and veto sets: 'segment|offset|put id', the
-- offset as u64 hex.
local function store_free_entry(seg, off, pid)
  return seg .. '|' .. off .. '|' .. pid
end

local store_segcache = {}

-- The ref of client in shard tag's client table, or false when it never put there (cached per
-- script call). A wire client's id is a 36-byte UUID: as a ref the object's c is 1-4 bytes.
local store_cidcache = {}
local function store_client_known(tag, client)
  local refs = store_cidcache[tag]
  if not refs then
    refs = {}
    store_cidcache[tag] = refs
  end
  local ref = refs[client]
  if ref == nil then
    ref = redis.call('HGET', K.cids(tag), '=' .. client) or false
    refs[client] = ref
  end
  return ref
end

-- The ref of client in shard tag's client table, adding its entry when it is new.
local function store_client_ref(tag, client)
  local ref = store_client_known(tag, client)
  if not ref then
    ref = string.format('%d', redis.call('HINCRBY', K.cids(tag), '#', 1))
    redis.call('HSET', K.cids(tag), ref, client, '=' .. client, ref)
    store_cidcache[tag][client] = ref
  end
  return ref
end

-- The segment-table entry ref of shard tag, as an array {seg, base, ep, proto, name} (cached).
local function store_segment(tag, ref)
  local ck = tag .. ref
  local s = store_segcache[ck]
  if not s then
    local raw = redis.call('HGET', K.segs(tag), ref)
    if not raw then
      error('store: shard ' .. tag .. ' has no segment ' .. ref)
    end
    s = cjson.decode(raw)
    store_segcache[ck] = s
  end
  return s
end

-- Appends to out, for each distinct segment ref of record raw (field r) of shard tag, the ref
-- and its segment-table entry as stored (cjson), cached per script call: what a reader needs to
-- decode the record itself (records.py).
local store_segraw = {}
local STORE_RECORD_REF = '[^,;]+,[^,;]+,([^,;]+),[^,;]+,[^,;]+'
local function store_record_segment(tag, ref, out)
  local ck = tag .. ref
  local desc = store_segraw[ck]
  if not desc then
    desc = redis.call('HGET', K.segs(tag), ref)
    if not desc then
      error('store: shard ' .. tag .. ' has no segment ' .. ref)
    end
    store_segraw[ck] = desc
  end
  out[#out + 1] = ref
  out[#out + 1] = desc
end
local function store_record_segments(tag, raw, out)
  if not string.find(raw, ';', 1, true) then -- one replica, the common case: one match
    local ref = string.match(raw, STORE_RECORD_REF)
    if ref then
      store_record_segment(tag, ref, out)
    end
    return
  end
  local seen = {}
  for ref in string.gmatch(raw, STORE_RECORD_REF) do
    if not seen[ref] then
      seen[ref] = true
      store_record_segment(tag, ref, out)
    end
  end
end

-- The ref of a replica's segment in shard tag, adding an entry when its fields are new.
local function store_segment_ref(tag, rep)
  local ep, proto, name = rep.ep or '', rep.proto or '', rep.name or ''
  -- Length-prefixed, so that no two field tuples share a cache key.
  local ck = tag .. '=' .. #rep.seg .. ':' .. rep.seg .. #rep.base .. ':' .. rep.base .. #ep .. ':'
    .. ep .. #proto .. ':' .. proto .. #name .. ':' .. name
  local ref = store_segcache[ck]
  if ref then
    return ref
  end
  local desc = cjson.encode({ rep.seg, rep.base, ep, proto, name })
  ref = redis.call('HGET', K.segs(tag), '=' .. desc)
  if not ref then
    ref = tostring(redis.call('HINCRBY', K.segs(tag), '#', 1))
    redis.call('HSET', K.segs(tag), ref, desc, '=' .. desc, ref)
  end
  store_segcache[ck] = ref
  return ref
end

local function store_unhex(x)
  return string.rep('0', 16 - #x) .. x
end

local function store_hex(x)
  local t = string.gsub(x, '^0+', '')
  return t == '' and '0' or t
end

-- The replicas of record raw (field r) of shard tag (default: the group being run).
local function store_replicas(raw, tag)
  local out = {}
  if not raw or raw == '' then
    return out
  end
  tag = tag or group.tag
  for id, st, ref, off, len in string.gmatch(raw, '([^,;]+),([^,;]+),([^,;]+),([^,;]+),([^,;]+)') do
    local s = store_segment(tag, ref)
    table.insert(out, { id = id, st = st, ref = ref, off = store_unhex(off), len = store_unhex(len),
      seg = s[1], base = s[2], ep = s[3], proto = s[4], name = s[5] })
  end
  return out
end

-- Encodes a non-empty replica list as record r of shard tag (default: the group being run);
-- a replica without a ref (a new one) gets its segment's.
local function store_encode(reps, tag)
  local parts = {}
  for i, rep in ipairs(reps) do
    local ref = rep.ref or store_segment_ref(tag or group.tag, rep)
    parts[i] = rep.id .. ',' .. rep.st .. ',' .. ref .. ',' .. store_hex(rep.off) .. ',' .. store_hex(rep.len)
  end
  return table.concat(parts, ';')
end

-- The replicas as the cjson array Python reads ({id, st, seg, off, len, base, ep, proto, name}).
local function store_json(reps)
  local out = {}
  for i, rep in ipairs(reps) do
    out[i] = { id = rep.id, st = rep.st, seg = rep.seg, off = rep.off, len = rep.len,
      base = rep.base, ep = rep.ep, proto = rep.proto, name = rep.name }
  end
  return #out > 0 and cjson.encode(out) or '[]'
end

-- Record raw (field r) with every replica COMPLETE: the status field of each replica rewritten
-- in place (no decode, no segment lookup, no encode). A plain ',P,' is a status and nothing
-- else: ids and refs are decimal, offsets and lengths lowercase hex, statuses P or C (a pattern
-- with captures cost about 8 k instructions per replica in Lua's matcher).
local function store_complete(raw)
  return (string.gsub(raw or '', ',P,', ',C,'))
end

local function store_all_complete(reps)
  for _, rep in ipairs(reps) do
    if rep.st ~= 'C' then
      return false
    end
  end
  return #reps > 0
end

local function store_any_complete(reps)
  for _, rep in ipairs(reps) do
    if rep.st == 'C' then
      return true
    end
  end
  return false
end

-- Erases object key of shard tag/shard: deletes its metadata, drops it from the shard indexes,
-- sends the frees of its remaining replicas to the outbox (appending {shard, entry} to frees) or,
-- when release_at is given, to the discarded set due at release_at, and unregisters it from the
-- radix index (continuations for the parent shards are appended to conts).
-- Returns false when the object does not exist, else true, its replica record (field r) and
-- the prefix it was unregistered from (nil when it was not registered).
local function store_erase(tag, shard, key, conts, frees, release_at)
  local okey = K.obj(tag, key)
  local f = redis.call('HMGET', okey, F.obj.replicas, F.obj.size, F.obj.put_id, F.obj.radix, F.obj.prefix, F.obj.prefix_len)
  if not f[3] then
    return false
  end
  local reps = store_replicas(f[1], tag)
  local pid = f[3]
  for _, rep in ipairs(reps) do
    local e = store_free_entry(rep.seg, rep.off, pid)
    if release_at then
      redis.call('ZADD', K.discarded(tag), release_at, e)
    else
      redis.call('RPUSH', K.outbox(tag), e)
      -- its parts beside it for evict_free_here (a reply sends only the array part)
      frees[#frees + 1] = { shard, e, seg = rep.seg, off = rep.off, pid = pid }
    end
  end
  store_drop(okey, key)
  redis.call('ZREM', K.lru(tag), key)
  redis.call('ZREM', K.processing(tag), key)
  redis.call('HINCRBY', K.stats(tag), F.stats.objects, -1)
  dec_hincr(K.stats(tag), 'bytes', f[2] or '0', true)
  local pfx = nil
  if f[4] then -- registered (rad '1' or '2')
    pfx = store_prefix(key, f[5], f[6])
    radix_remove_key(tag, shard, pfx, key, conts)
    radix_lost_object(tag, shard, pfx, conts, now_ms())
  end
  return true, f[1], pfx
end

-- The lease index of one shard: {lease, key...} pairs of not hard-pinned objects, one ZADD GT
-- (a grant only extends). The one place a lease grant writes the index.
local function store_index_leases(tag, pairs)
  zadd_pairs(K.lru(tag), 'GT', pairs)
end

-- Integer ms x as a decimal string ('%d': digits only, at any size, as radix_ms_max compares
-- them), memoized per script call: now + ttl is formatted once per call, not once per shard.
local function store_ms(x)
  return radix_fmt('%d', x)
end

-- What a grant reads (exist, get_replicas), built once per call from the caller's fields (...):
-- fields (an object hash's HMGET: l, sp, hp, rad, pfx, the caller's fields, pl last; nf of
-- them: store_grant_leases takes its reply as it is);
-- block (a block hash's: fields, then the node's fields radix_touch reads, nb in all); and hot
-- (a block hash's in a radix namespace: l, rad, the caller's fields, the node's fields: what a
-- registered block key with rad '1' holds, every one present; none of sp, hp, pfx, pl, which
-- rad '1' says are absent and which a listpack finds absent only by scanning all its fields).
-- The caller's first field must be one every object has (st, r): it tells a miss.
local function store_grant_reads(radix_on, ...)
  local fields = { F.obj.lease_ms, F.obj.soft_pin_ms, F.obj.hard_pin, F.obj.radix, F.obj.prefix, ... }
  fields[#fields + 1] = F.obj.prefix_len
  local nf = #fields
  local block, hot = { unpack(fields) }, { F.obj.lease_ms, F.obj.radix, ... }
  for _, name in ipairs(RADIX_TOUCH_TIER_FIELDS) do -- what radix_touch reads (radix.lua)
    block[#block + 1] = name
    hot[#hot + 1] = name
  end
  return { fields = fields, block = block, hot = hot, nf = nf, nb = #block, radix = radix_on == 1 }
end

-- A hot read (reads.hot) laid out as a block read (reads.block), the absent fields false:
-- store_grant_leases and radix_touch take either.
local function store_grant_expand(c, reads)
  local g = { c[1], false, false, c[2], false, false, false, false, false, false, false, false }
  local m, nf = 2, reads.nf
  for i = 6, nf - 1 do
    m = m + 1
    g[i] = c[m]
  end
  g[nf] = false
  for i = nf + 1, reads.nb do
    m = m + 1
    g[i] = c[m]
  end
  return g
end

-- The object hash of key and its grant fields (store_grant_reads), in the layout of reads.fields
-- or, for a block key, of reads.block (the node's fields at nf + 1): store_grant_leases then
-- writes the object's grant and its node's touch in one HSET. A block key in a radix namespace
-- is read hot first: one HMGET of present fields; only a registered object with a pin or a
-- stored prefix (rad '2') or an unregistered one is read again whole.
local function store_grant_read(tag, key, reads)
  local okey, blk = K.obj_at(tag, key)
  if not blk or not reads.radix then -- no node fields in the hash (none in a namespace without a tree)
    return okey, redis.call('HMGET', okey, unpack(reads.fields))
  end
  local c = redis.call('HMGET', okey, unpack(reads.hot))
  if c[2] ~= '1' and c[3] then
    return okey, redis.call('HMGET', okey, unpack(reads.block))
  end
  return okey, store_grant_expand(c, reads)
end

-- The lease grants of one shard (exist hits, get replica lists), batched: per object
-- l = max(l, now + ttl) and the soft pin refreshed the same way, in one HSET of what changes
-- (none when both already reach that far); then the lease index in one ZADD, and each radix
-- node once with its newest lease and grant count (radix_touch). keys: the hits (a key may
-- repeat); fs: their HMGET replies of reads.fields (store_grant_reads: l, sp, hp, rad, pfx first, pl last)
-- or of store_grant_read; okeys (optional): their object keys, as the caller's HMGET built
-- them; nb (optional): #fields of store_grant_read (a longer reply read a block hash's node
-- fields too); n (optional): how many of keys, fs, okeys are this call's (tables a caller
-- reuses across shards; default #keys). A block key that is its own prefix (an MLA key; read by store_grant_read) has its
-- object's grant written with its node's touch, in one HSET (radix_touch, no HMGET). Times
-- stay decimal strings (radix_ms_max): no tonumber per key, and a lease goes back to Redis as
-- read or as the one now + ttl string of the call. Returns the leases (strings), in keys order.
local function store_grant_leases(tag, keys, fs, now, ttl, soft_ttl, okeys, nb, n)
  local leases, indexed, touched, nodes = {}, {}, {}, {}
  n = n or #keys
  if n == 0 then
    return leases
  end
  local floor, soft_floor = store_ms(now + ttl), store_ms(now + soft_ttl)
  for i = 1, n do
    local key, g = keys[i], fs[i]
    local lease = radix_ms_max(g[1], floor)
    local sp = g[2] -- absent: no soft pin
    local soft = sp and radix_ms_max(sp, soft_floor)
    local pl = g[nb or #g]
    -- The node is this very hash: a block hash's read (the node's fields follow pl), the key
    -- its own prefix (no pfx, no pl) and registered.
    local merged = nb and #g > nb and g[4] and not g[5] and not pl
    if not merged and (lease ~= g[1] or soft ~= sp) then
      local okey = okeys and okeys[i] or K.obj(tag, key)
      if lease == g[1] then
        redis.call('HSET', okey, F.obj.soft_pin_ms, soft)
      elseif soft ~= sp then
        redis.call('HSET', okey, F.obj.lease_ms, lease, F.obj.soft_pin_ms, soft)
      else
        redis.call('HSET', okey, F.obj.lease_ms, lease)
      end
    end
    if g[3] ~= '1' and not g[4] then -- lru: objects of no tree only (leaves order the rest)
      indexed[#indexed + 1] = lease
      indexed[#indexed + 1] = key
    end
    if g[4] then -- registered (rad '1' or '2')
      local pfx = store_prefix(key, g[5], pl)
      local t = touched[pfx]
      -- merged: the node's HSET carries the object's grant (radix_touch); all of a call's reads
      -- precede its writes, so a repeat read the same and its entry is the first one's
      local okey = merged and (okeys and okeys[i] or K.obj(tag, key))
      local tl, tsp = merged and lease ~= g[1] and lease, merged and soft ~= sp and soft
      if t then
        t[2], t[3] = radix_ms_max(t[2], lease), t[3] + 1
        if merged then
          t.g, t.nb, t.okey, t.l, t.sp = g, nb, okey, tl, tsp
        end
      else -- one constructor, every field present (false: none), so the table is sized once
        t = { pfx, lease, 1, g = merged and g, nb = merged and nb, okey = okey, l = tl, sp = tsp }
        touched[pfx] = t
        nodes[#nodes + 1] = t
      end
    end
    leases[i] = lease
  end
  store_index_leases(tag, indexed)
  radix_touch(tag, nodes)
  return leases
end

-- A put that fails after its radix link step bumped the edge parent -> h: if the node already
-- names that parent, the edge is not fresh and must stay: the node adopts the newest generation
-- (edge generations only grow, so the max is the edge's). Returns 1 when adopted (no undo).
-- parent: as the node stores it (radix_parent_field; the callers' ARGV carry it so).
local function store_adopt_edge(tag, h, parent, gen)
  if parent == '' or tonumber(gen) == 0 then
    return 0
  end
  local f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.link_gen, F.node.created_ms)
  if f[1] ~= parent then
    return 0
  end
  if tonumber(gen) > (tonumber(radix_link_gen(f[1], f[2], f[3])) or 0) then
    redis.call('HSET', K.node(tag, h), F.node.link_gen, gen)
  end
  return 1
end
