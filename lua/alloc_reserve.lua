#!lua flags=allow-cross-slot-keys
-- alloc_reserve: step 1 of PutStart: buffers for a batch of puts in the segments of ONE node.
-- Each allocation is owner-tagged (key, put id) and recorded in the segment's pending set with
-- Redis time; the object shard commits it (put_start) or the janitor reclaims it.
-- Per item, segments are tried in order: preferred first, then a walk over KEYS from a random
-- start; replicas of one item land on distinct segments; an item may get fewer than wanted.
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: segment count m, m anchors (the candidates), item count, then per item: owner (the
--       key, records.alloc_owner encoding), put id,
--       size (bytes, u64 hex), replicas wanted, start index (0-based into the anchors),
--       preferred count np, then np 1-based anchor indices.
-- Returns: {now ms, {per item, flat: 2g, then g grants: anchor index, offset (u64 hex)},
--          largest size of a mounted candidate segment (u64 hex), {per anchor: {base (u64
--          hex), te_endpoint, protocol, name} ({} when not mounted)}}. Flat, not a table per
--          item: Redis probes every table of a reply for seven special fields.
-- Cost: no Redis call per allocation in the common case (alloc.lua, alloc_take); per segment
--   two reads of its info and a constant number of writes, plus one HSET and one ZADD per
--   record bucket touched (64 allocations of one size share a bucket).
-- Errors: none (an item that gets nothing has an empty list).
-- Idempotent: yes in effect: a reservation whose reply was lost is never committed, so the
--   janitor frees it after alloc_reclaim_grace_ms.
--!include alloc.lua

local now = now_ms()
local S = {}
for i = 1, argn() do
  S[i] = arg()
end
local info = {}
local maxsize = U64_ZERO
local function seg(i)
  local s = info[i]
  if s == nil then
    local f = redis.call('HMGET', S[i], 'mounted', 'size', 'base', 'te_endpoint', 'protocol', 'name')
    if f[1] == '1' then
      s = { size = f[2], base = f[3], ep = f[4], proto = f[5], name = f[6] }
      if s.size > maxsize then
        maxsize = s.size
      end
    else
      s = false
    end
    info[i] = s
  end
  return s
end
for i = 1, #S do
  seg(i)
end

-- Per item: the preferred indices (pref, reused) and the anchors tried (used[i] = item number)
-- need no table of their own; its grants go straight into the flat reply. An item's six fields are read at once
-- from ARGV, and its small decimal numbers through a memo (tonumber parses each string once).
local out, states, pref, used, nums = {}, {}, {}, {}, {}
local function num(x)
  local v = nums[x]
  if not v then
    v = tonumber(x)
    nums[x] = v
  end
  return v
end
local m = #S
local n = argn()
local c, o = cursor.i, 0
for it = 1, n do
  local key, pid, size, want, start, np = unpack(ARGV, c + 1, c + 6)
  want, start, np = nums[want] or num(want), nums[start] or num(start), nums[np] or num(np)
  c = c + 6
  for j = 1, np do
    local x = ARGV[c + j]
    pref[j] = nums[x] or num(x)
  end
  c = c + np
  local at, ng = o + 1, 0 -- out[at]: the item's 2g
  o = at
  for j = 1, np + m do
    if ng >= 2 * want then -- two entries a grant
      break
    end
    local i
    if j <= np then
      i = pref[j]
    else
      i = ((start + j - np - 1) % m) + 1
    end
    local s = info[i]
    if s == nil then
      s = seg(i)
    end
    if s and used[i] ~= it and s.size >= size then
      used[i] = it
      local st = states[i]
      if not st then
        st = alloc_begin(K.tag(S[i]))
        states[i] = st
      end
      local off = alloc_take(st, size, key, pid, now)
      if off then
        out[o + 1], out[o + 2], o, ng = i, off, o + 2, ng + 2
      end
    end
  end
  out[at] = ng
end
cursor.i = c
for i = 1, #S do
  if states[i] then
    alloc_end(states[i])
  end
end
-- Each candidate's details once ({} for one not mounted), not once per grant.
local segs = {}
for i = 1, #S do
  local x = info[i]
  segs[i] = x and { x.base, x.ep, x.proto, x.name } or {}
end
return { now, out, maxsize, segs }
