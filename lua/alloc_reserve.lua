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
-- Returns: {now ms, {per item: {anchor index, offset (u64 hex), anchor index, offset...}},
--          largest size of a mounted candidate segment (u64 hex), {per anchor: {base (u64
--          hex), te_endpoint, protocol, name} ({} when not mounted)}}.
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

local out, states = {}, {}
local n = argn()
for _ = 1, n do
  local key, pid, size, want, start, np = arg(), arg(), arg(), argn(), argn(), argn()
  local order = {}
  for _ = 1, np do
    table.insert(order, argn())
  end
  for j = 0, #S - 1 do
    table.insert(order, ((start + j) % #S) + 1)
  end
  local used, got = {}, {}
  for _, i in ipairs(order) do
    if #got >= 2 * want then -- two entries a grant
      break
    end
    local s = seg(i)
    if s and not used[i] and s.size >= size then
      used[i] = true
      states[i] = states[i] or alloc_begin(K.tag(S[i]))
      local off = alloc_take(states[i], size, key, pid, now)
      if off then
        table.insert(got, i)
        table.insert(got, off)
      end
    end
  end
  table.insert(out, got)
end
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
