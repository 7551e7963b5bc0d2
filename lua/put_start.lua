#!lua flags=allow-cross-slot-keys
-- put_start: step 2 of PutStart (commit): writes the objects whose buffers alloc_reserve got.
-- Per item: refuses an existing object (OBJECT_ALREADY_EXISTS) unless it is a stale put (no
-- COMPLETE replica, put start + discard timeout passed), which is taken over: its buffers go to
-- the discarded set, released at its put start + release timeout. Refuses allocations older
-- than the commit deadline (the janitor may reclaim them after its grace) and allocations vetoed
-- by an unmount. With the radix flag, registers the key under its prefix node (RFC Path A).
-- Cost: per item one HMGET of the object, one HSET of all its fields, and (radix) one HMGET and
-- one HSET of its node (its tiered leaf score from what the HMGET read); a block key that is its
-- own prefix (MLA) reads both in one HMGET and writes both in one HSET; per shard one HMGET and
-- one HSET of the stats (tier state, counters), one ZADD processing, one INCRBY of the replica
-- id counter, one ZADD / ZREM of the leaf index (deferred writes, flushed before any takeover).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: num_shards, commit deadline ms, discard timeout ms, release timeout ms, soft pin
--       ttl ms, radix flag (0/1), client id (stored as its ref in the shard's client table), the call's segment table: m, then m segments
--       (segment id, base (u64 hex), te endpoint, protocol, name); then group count, then per
--       group: anchor, shard index, n, then n items of
--       key, put id, size (bytes, decimal string), soft pin (0/1), hard pin (0/1), replica
--       count r, then r replicas (segment (1-based index into the segment table), offset and
--       length (u64 hex), allocation ms), prefix hash, parent as its node stores it ('' none,
--       '>' + 32 bytes: keys.node_parent_field), parent shard
--       (-1 none), link generation (0 none; 'f' or 'g': link here, see below), cycle checked
--       (0/1), the prefix's edge field when linked here (keys.node_child_field; '' otherwise).
-- An item whose parent block is an earlier item of its group (same shard) comes with
-- generation 'f': radix_link's step runs here, parent first, just before the item's own
-- writes once its checks passed (radix_link_pair), so a chain put in one batch makes no shell
-- parents in a step before this one, and needs no cycle check (a node made now has no child).
-- A parent this call created is known without a read (radix_link_seed). Such an item that
-- answers 1 (the cycle check) is linked all the same and comes back with its generation.
-- Generation 'g': the same for an item whose parent block is no item of the batch, in the same
-- shard, with the put guard: a parent block that is not completely stored, or is an orphan,
-- refuses the item (OBJECT_NOT_FOUND; OBJECT_ALREADY_EXISTS when the key exists and is not a
-- stale put, as put_precheck answers), before anything of it is written or linked: the check
-- and the link are one atomic step, where the link step's stored flag came a round trip before.
-- Returns: {items, {continuation...}}: items flat, per item in ARGV order: code, message,
--          replica count m, m replica ids (decimal strings), edge adopted 0/1, and the link made
--          here: its generation and whether the parent block was stored before this call (0/1),
--          or '' and '' for none. Flat, not a table per item: Redis turns every table of a reply
--          into an array after probing it for seven special fields (5 % of this script's Redis
--          instructions for batch puts, when each item had two or three tables).
--          Idempotent: an object already written by this put id (a resent call whose first
--          reply was lost) answers OK with its replica ids.
--   A failed item whose node already names the parent adopts the bumped edge (no undo).
-- Errors (per item): OBJECT_ALREADY_EXISTS (-705), INVALID_PARAMS (-600, radix parent conflict),
--   OBJECT_NOT_FOUND (-704, 'g': the parent block is not stored, or is an orphan),
--   SEGMENT_NOT_FOUND (-101, segment unmounted meanwhile), INTERNAL_ERROR (-1, allocation older
--   than the commit deadline); 1 (not a Mooncake code; nothing written) when the node exists
--   without a parent and has children and the cycle check was not done (see radix_register).
-- Idempotent: yes (an object already written by this put id answers OK).
--!include store.lua

local num_shards, deadline, discard, release, soft_ttl, radix_on =
  argn(), argn(), argn(), argn(), argn(), argn()
local client = arg()
-- The segments the replicas name (by their index, as ARGV strings '1', '2'...), each with
-- its ref per shard (store_segment_ref, resolved once per segment and shard).
local segs = {}
for i = 1, argn() do
  segs[string.format('%d', i)] = { seg = arg(), base = arg(), ep = arg(), proto = arg(), name = arg(), refs = {} }
end
local now = now_ms()
local now_s, oldest = string.format('%d', now), now - deadline
local out, conts, frees = {}, {}, {}
local fresh = {} -- keys this call wrote that had no object before it (a link's stored: before)
local ONE = string.format('%016x', 1)

-- m replica ids of shard tag/shard: id = seq * num_shards + shard, from one INCRBY; exact past
-- 2^53 (the counter is then read back as a string). Returns a function giving the next id.
local function new_ids(tag, shard, m)
  local last = redis.call('INCRBY', K.seq(tag), m)
  if last < 2 ^ 53 / 32768 then
    local seq = last - m
    return function()
      seq = seq + 1
      return string.format('%d', seq * num_shards + shard)
    end
  end
  local x = u64_sub(u64_from_dec(redis.call('GET', K.seq(tag))), string.format('%016x', m))
  return function()
    x = u64_add(x, ONE)
    return u64_to_dec(u64_muladd(x, num_shards, shard))
  end
end

-- What a put reads of an existing object: put start, replicas, put id.
local OBJ_READ = { F.obj.created_ms, F.obj.replicas, F.obj.put_id }

-- The shard counters a put adds to (flush), in the order of its reads.
local COUNTERS = { F.stats.objects, F.stats.bytes, F.stats.nodes, F.stats.rkeys }

each_group(function(tag, shard, n)
  local stats = K.stats(tag)
  -- One read of the shard's stats: the tier state and the counters the flush adds to (valid
  -- until the first flush; a takeover's erase writes the counters itself, so a later flush
  -- reads them again).
  local base = redis.call('HMGET', stats, F.stats.tier_offsets, F.stats.turnover, F.stats.clock, unpack(COUNTERS))
  radix_tier_prime(tag, base[1], base[2], base[3])
  local vetoes = redis.call('EXISTS', K.veto(tag)) == 1
  if vetoes then
    redis.call('ZREMRANGEBYSCORE', K.veto(tag), '-inf', now - deadline - 1000)
    vetoes = redis.call('EXISTS', K.veto(tag)) == 1
  end
  -- The items are read from ARGV in place (no table per item or replica): an item at cursor
  -- position i is key, put id, size, soft, hard, r, r x (segment, offset, length, ms), prefix,
  -- parent, parent shard, generation, checked, prefix's edge field; first the shard's replica
  -- count (the id pool).
  local A = ARGV
  local starts, left, i = {}, 0, cursor.i
  for j = 1, n do
    starts[j] = i
    local r = tonumber(A[i + 6])
    left = left + r
    i = i + 12 + 4 * r
  end
  cursor.i = i
  -- Deferred writes: objects count, bytes (a number while exact, else a decimal string),
  -- processing entries, the radix counters and leaf entries.
  local acc = radix_acc()
  acc.drop = {} -- nodes made here that got a child here: no leaf entry (radix_link_seed)
  local seen, exposing = {}, radix_tier_state(tag) -- the links made here (radix_link_pair)
  -- The parent side of an item's link made here (generation 'f'): its generation (decimal
  -- string) and whether the parent block was stored before this call. The prefix's edge field
  -- comes from the caller (cf): no 64-hex packing here, and the next item of a chain, whose
  -- parent this block is, finds the parent's hash without unpacking it (radix_child_field_is).
  local function link_here(parent, prefix, cf)
    if cf == '' then -- a caller bug: it would write a wrong edge
      error('put_start: ' .. prefix .. ' is linked here without its edge field')
    end
    radix_child_field_is(prefix, cf)
    local g, stored = radix_link_pair(tag, radix_parent_hash(parent), prefix, cf, seen, acc, exposing, now, fresh)
    return radix_ms(g), stored
  end
  -- The put guard of a 'g' item's parent (as its node stores it), once per parent and call:
  -- true when it refuses (the parent block is not completely stored, or is an orphan).
  local guard = {}
  local function guard_refuses(parent)
    local r = guard[parent]
    if r == nil then
      r = radix_node_stored(tag, radix_parent_hash(parent), fresh) == 0
      guard[parent] = r
    end
    return r
  end
  local objs, bytes, big, proc = 0, 0, '0', {}
  local cur = { base[4], base[5], base[6], base[7] }
  -- The deferred counters in one HSET (a read first unless the group's first read is still
  -- current); bytes exact as a number below 2^53, else as a decimal string (dec_add).
  local function flush()
    if objs ~= 0 or bytes ~= 0 or big ~= '0' or acc.nodes ~= 0 or acc.rkeys ~= 0 then
      if not cur then
        cur = redis.call('HMGET', stats, unpack(COUNTERS))
      end
      local w = {}
      for i, d in ipairs({ objs, 0, acc.nodes, acc.rkeys }) do
        if d ~= 0 then
          w[#w + 1], w[#w + 2] = COUNTERS[i], string.format('%d', (tonumber(cur[i]) or 0) + d)
        end
      end
      if bytes ~= 0 or big ~= '0' then
        local b = cur[2] or '0'
        if #b <= 15 and big == '0' then
          b = string.format('%d', tonumber(b) + bytes)
        else
          b = dec_add(dec_add(b, string.format('%d', bytes)), big)
        end
        w[#w + 1], w[#w + 2] = COUNTERS[2], b
      end
      redis.call('HSET', stats, unpack(w))
    end
    cur = nil
    zadd_same_score(K.processing(tag), now_s, proc)
    local leaf, drop = acc.leaf, acc.drop
    if next(drop) then
      leaf = {}
      for j = 1, #acc.leaf, 2 do
        if not drop[acc.leaf[j + 1]] then
          leaf[#leaf + 1], leaf[#leaf + 2] = acc.leaf[j], acc.leaf[j + 1]
        end
      end
    end
    variadic('ZADD', K.leaves(tag), leaf)
    variadic('ZREM', K.leaves(tag), acc.unleaf)
    objs, bytes, big, proc = 0, 0, '0', {}
    acc.nodes, acc.rkeys, acc.leaf, acc.unleaf, acc.drop = 0, 0, {}, {}, {}
  end
  local next_id, pool = nil, 0
  for j = 1, n do
    local i = starts[j]
    local key, pid, size, nreps = A[i + 1], A[i + 2], A[i + 3], tonumber(A[i + 6])
    local e = i + 7 + 4 * nreps -- prefix
    local prefix, parent, pshard, gen = A[e], A[e + 1], A[e + 2], A[e + 3]
    local here = gen == 'f' or gen == 'g' -- linked in this call (link_here)
    left = left - nreps
    local code, msg = E.OK, ''
    for r = i + 7, e - 1, 4 do
      if code == E.OK and tonumber(A[r + 3]) < oldest then
        code, msg = E.INTERNAL_ERROR, 'key ' .. key .. ': allocation older than the commit deadline'
      end
      local seg = segs[A[r]].seg
      if code == E.OK and vetoes
          and redis.call('ZSCORE', K.veto(tag), store_free_entry(seg, A[r + 1], pid)) then
        code, msg = E.SEGMENT_NOT_FOUND, 'key ' .. key .. ': segment ' .. seg .. ' was unmounted'
      end
    end
    local okey, blk = K.obj_at(tag, key)
    -- A block key that is its own prefix (an MLA key) has its object's fields in its node's
    -- hash: one HMGET reads both and one HSET (radix_attach's) writes both.
    local merged = radix_on == 1 and blk and prefix == key
    local takeover, f, pre = nil, nil, nil
    if merged then
      pre, f = radix_pre(tag, prefix, key, OBJ_READ)
    else
      f = redis.call('HMGET', okey, unpack(OBJ_READ))
    end
    if f[3] == pid then
      code = 'again'
    end
    -- The key exists and is not a stale put (a stale one is taken over).
    local live = f[3] and code ~= 'again'
      and (store_any_complete(store_replicas(f[2])) or tonumber(f[1]) + discard > now)
    if gen == 'g' and code ~= 'again' and guard_refuses(parent) then
      -- The put guard answers before the commit's own checks, as when it refused the put
      -- before the commit: only a key that exists answers otherwise.
      if live then
        code, msg = E.OBJECT_ALREADY_EXISTS, 'key ' .. key .. ': object already exists'
      else
        code, msg = E.OBJECT_NOT_FOUND, 'config.parent_block_hash: block ' .. radix_parent_hash(parent)
          .. ' is not stored (or is itself an orphan: its own parent block is gone);'
          .. ' refusing an orphan (radix_put_guard)'
      end
    elseif code == E.OK and f[3] then
      if live then
        code, msg = E.OBJECT_ALREADY_EXISTS, 'key ' .. key .. ': object already exists'
      else
        takeover = tonumber(f[1])
      end
    end
    if code == E.OK and radix_on == 1 then
      pre = pre or radix_pre(tag, prefix, key)
      local cur = pre[1]
      if parent ~= '' and cur and cur ~= '' and cur ~= parent then
        code, msg = E.INVALID_PARAMS,
          'parent_block_hash: node ' .. prefix .. ' already has parent ' .. radix_parent_hash(cur)
      elseif parent ~= '' and A[e + 4] ~= '1' and cur == '' and pre[5] > 0 then
        code, msg = RADIX_CHECK_CYCLE, 'parent cycle check needed'
      end
    end
    local ids = {}
    local lgen, lstored = '', '' -- a link made here: generation, parent block stored before this call
    if code == RADIX_CHECK_CYCLE and here then
      -- Linked all the same, as the link step would have before the commit: until the caller
      -- has checked and sent it again (with this generation), the edge keeps the parent from
      -- being evicted as a leaf; a refused cycle drops it (the caller's undo of a failed put).
      lgen, lstored = link_here(parent, prefix, A[e + 5])
    end
    if code == E.OK then
      if takeover then
        -- The erase reads and writes what the deferred writes touch: write them first.
        flush()
        store_erase(tag, shard, key, conts, frees, takeover + release)
        redis.call('HINCRBY', stats, 'put_start_discard_cnt', 1)
        if radix_on == 1 then
          pre = radix_pre(tag, prefix, key)
        end
        seen = {} -- the erase may have changed nodes the links here know
      end
      -- One INCRBY for this item and every later one of the shard (a failed one leaves a gap).
      if nreps > pool then
        next_id, pool = new_ids(tag, shard, nreps + left), nreps + left
      end
      pool = pool - nreps
      local reps = {}
      for r = i + 7, e - 1, 4 do
        local id = next_id()
        local sg = segs[A[r]]
        local ref = sg.refs[tag]
        if not ref then
          ref = store_segment_ref(tag, sg)
          sg.refs[tag] = ref
        end
        reps[#reps + 1] = { id = id, st = 'P', ref = ref, off = A[r + 1], len = A[r + 2] }
        ids[#ids + 1] = id
      end
      -- Sized once by its constructor (the optional fields fill the falses; HSET takes nf).
      local fields = { F.obj.client, store_client_ref(tag, client), F.obj.created_ms, now_s, F.obj.size, size,
        F.obj.lease_ms, '0', F.obj.status, 'P', F.obj.put_id, pid, F.obj.replicas, store_encode(reps),
        false, false, false, false, false, false, false, false }
      local nf = store_prefix_fields(key, prefix, fields, 14)
      if A[i + 4] == '1' then
        fields[nf + 1], fields[nf + 2], nf = F.obj.soft_pin_ms, string.format('%d', now + soft_ttl), nf + 2
      end
      if A[i + 5] == '1' then
        fields[nf + 1], fields[nf + 2], nf = F.obj.hard_pin, '1', nf + 2
      end
      if radix_on == 1 then -- '2': a pin or a stored prefix is among the fields (store_grant_read)
        fields[nf + 1], fields[nf + 2], nf = F.obj.radix, nf > 14 and '2' or '1', nf + 2
      end
      if not merged then
        redis.call('HSET', okey, unpack(fields, 1, nf))
      end
      proc[#proc + 1] = key
      objs = objs + 1
      if not f[3] then
        fresh[key] = true
      end
      if #size <= 15 then
        bytes = bytes + tonumber(size)
        if bytes >= 2 ^ 52 then
          big = dec_add(big, string.format('%d', bytes))
          bytes = 0
        end
      else
        big = dec_add(big, size)
      end
      if radix_on == 1 then
        -- A block whose children were marked as orphans is stored again: they are adopted.
        -- (Merged, the object is not written yet: as when it was, a key already registered
        -- counts as an object of the block, so it adopts nothing.)
        local adopt = pre[4] == '1' and radix_will_adopt(tag, prefix) and not (merged and pre[9])
        if here then -- the parent side of the link, now that the item will be written
          lgen, lstored = link_here(parent, prefix, A[e + 5])
          gen = lgen
        end
        -- Merged, its HSET writes the object too. (Its checks are the ones above, on the same
        -- read: it writes; if not, the object is written alone, as before the merge.)
        local res = radix_attach(tag, prefix, parent, pshard, gen, { key }, now, 1, acc, pre, merged and fields, nf)
        if merged and res ~= E.OK then
          redis.call('HSET', okey, unpack(fields, 1, nf))
        elseif res == E.OK and not pre[1] then -- a node made now: a later child links to it unread
          radix_link_seed(seen, prefix, parent == '')
        end
        if adopt then
          radix_mark_children(tag, shard, prefix, 'adopt', conts, now)
        end
      end
    end
    local adopted = 0
    if code == 'again' then
      code = E.OK
      for j, rep in ipairs(store_replicas(f[2])) do
        ids[j] = rep.id
      end
      -- Written by this put (a resent call whose reply was lost): new in the batch, and, linked
      -- here, the parent block's stored flag is reported again (read only: the edge stands).
      fresh[key] = true
      if here then
        lgen, lstored = '0', radix_node_stored(tag, radix_parent_hash(parent), fresh)
      end
    elseif code ~= E.OK and radix_on == 1 and not here then -- linked here: no edge was made
      adopted = store_adopt_edge(tag, prefix, parent, gen)
    end
    local m, o = #ids, #out
    out[o + 1], out[o + 2], out[o + 3] = code, msg, m
    for r = 1, m do
      out[o + 3 + r] = ids[r]
    end
    o = o + 3 + m
    out[o + 1], out[o + 2], out[o + 3] = adopted, lgen, lstored
  end
  flush()
end)
return { out, conts }
