-- Segment allocator inside ONE segment tag (stag). Needs keys.lua, errors.lua, common.lua,
-- u64.lua.
--
-- Every offset and length is a u64 (16 hex characters, see u64.lua): no Lua number, no ZSET
-- score (a double) ever holds one. Best fit over free extents kept in two lexicographically
-- ordered ZSETs (every score 0, ZRANGEBYLEX): free_off members are offset .. length (neighbours
-- by offset), free_len members are length .. offset (best fit: the smallest length >= size,
-- lowest offset among equals). O(log n) per call; a reserve script's allocations carve one
-- held extent in Lua and write once per segment (alloc_begin / alloc_take / alloc_end), so a
-- batch in one large free extent costs no Redis call per allocation. alloc HASH: offset -> "len|put id|ms|owner
-- key" (the owner key last: it may contain '|'). pending ZSET: offset -> alloc ms, allocations
-- not yet confirmed by the janitor. info.allocated = sum of the lengths in alloc (a u64).
--!include common.lua
--!include u64.lua

-- "len|pid|ms|owner" -> len (u64), pid, ms (number), owner
local function alloc_parse(rec)
  local a = string.find(rec, '|', 1, true)
  local b = string.find(rec, '|', a + 1, true)
  local c = string.find(rec, '|', b + 1, true)
  return string.sub(rec, 1, a - 1), string.sub(rec, a + 1, b - 1),
    tonumber(string.sub(rec, b + 1, c - 1)), string.sub(rec, c + 1)
end

local function alloc_add_free(stag, off, len)
  redis.call('ZADD', K.free_off(stag), 0, off .. len)
  redis.call('ZADD', K.free_len(stag), 0, len .. off)
end

local function alloc_del_free(stag, off, len)
  redis.call('ZREM', K.free_off(stag), off .. len)
  redis.call('ZREM', K.free_len(stag), len .. off)
end

-- The whole segment free: one extent [0, size).
local function alloc_init(stag, size)
  redis.call('DEL', K.free_off(stag), K.free_len(stag), K.alloc(stag), K.pending(stag))
  alloc_add_free(stag, U64_ZERO, size)
end

-- Inserts the free extent [off, off + len), merging it with free neighbours.
local function alloc_insert_free(stag, off, len)
  local fo = K.free_off(stag)
  -- Members below the bare offset are exactly the extents that start before it.
  local prev = redis.call('ZREVRANGEBYLEX', fo, '(' .. off, '-', 'LIMIT', 0, 1)[1]
  if prev then
    local poff, plen = string.sub(prev, 1, 16), string.sub(prev, 17, 32)
    if u64_add(poff, plen) == off then
      alloc_del_free(stag, poff, plen)
      off, len = poff, u64_add(plen, len)
    end
  end
  local stop = u64_add(off, len)
  -- 'g' sorts after every hex digit: the first extent starting after off.
  local nxt = redis.call('ZRANGEBYLEX', fo, '(' .. off .. 'g', '+', 'LIMIT', 0, 1)[1]
  if nxt and string.sub(nxt, 1, 16) == stop then
    local nlen = string.sub(nxt, 17, 32)
    alloc_del_free(stag, stop, nlen)
    len = u64_add(len, nlen)
  end
  alloc_add_free(stag, off, len)
end

-- A script's allocations in segment stag (alloc_begin, alloc_take..., alloc_end): best fit as
-- if each were written at once, but the extent being carved is held in Lua (out of the free
-- ZSETs) and the records, pending entries and the allocated total are written once in
-- alloc_end. A batch of puts in a fresh (or one large free) extent costs no Redis call per
-- allocation: the held extent is compared with the best ZSET extent, and a ZSET lookup that
-- found nothing for a size is not repeated for that size or larger (nothing is added to the
-- ZSETs meanwhile, except a held extent put back, which forgets it). Only this script sees the
-- held state: frees, the janitor and unmounts see the segment after alloc_end.
local function alloc_begin(stag)
  return { stag = stag, hold = nil, recs = {}, pend = {}, total = U64_ZERO, none = nil }
end

-- Best-fit allocation of size bytes (u64). Returns the offset (u64), or nil when no extent is
-- large enough.
local function alloc_take(st, size, owner, pid, now)
  local stag, hold = st.stag, st.hold
  local c = nil
  if not (st.none and size >= st.none) then
    c = redis.call('ZRANGEBYLEX', K.free_len(stag), '[' .. size, '+', 'LIMIT', 0, 1)[1]
    if not c then
      st.none = size
    end
  end
  local fits = hold and hold.len >= size
  if c then
    local clen, coff = string.sub(c, 1, 16), string.sub(c, 17, 32)
    -- Smallest length first, lowest offset among equals (the ZSET's lexicographic order).
    if not (fits and (hold.len < clen or (hold.len == clen and hold.off < coff))) then
      alloc_del_free(stag, coff, clen)
      if hold then
        alloc_add_free(stag, hold.off, hold.len)
        st.none = nil
      end
      hold = { off = coff, len = clen }
    end
  elseif not fits then
    return nil
  end
  local off = hold.off
  if hold.len > size then
    st.hold = { off = u64_add(off, size), len = u64_sub(hold.len, size) }
  else
    st.hold = nil
  end
  table.insert(st.recs, off)
  table.insert(st.recs, size .. '|' .. pid .. '|' .. string.format('%d', now) .. '|' .. owner)
  table.insert(st.pend, now)
  table.insert(st.pend, off)
  st.total = u64_add(st.total, size)
  return off
end

-- Writes a script's allocations in st's segment: the held extent's rest back to the free
-- ZSETs (its neighbours are allocated: it is the tail of a maximal extent), the records, the
-- pending entries and the allocated total.
local function alloc_end(st)
  local stag = st.stag
  if st.hold then
    alloc_add_free(stag, st.hold.off, st.hold.len)
    st.hold = nil
  end
  if #st.recs > 0 then
    variadic('HSET', K.alloc(stag), st.recs)
    variadic('ZADD', K.pending(stag), st.pend)
    local allocated = redis.call('HGET', K.info(stag), F.info.allocated) or U64_ZERO
    redis.call('HSET', K.info(stag), F.info.allocated, u64_add(allocated, st.total))
  end
  st.recs, st.pend, st.total = {}, {}, U64_ZERO
end

-- Frees the allocation at off (u64) if its record carries put id pid (idempotent: a second
-- free, or a free of an offset reused by another put, does nothing). Returns the freed length
-- (u64; zero if none).
local function alloc_release(stag, off, pid)
  if not u64_valid(off) then
    return U64_ZERO
  end
  local rec = redis.call('HGET', K.alloc(stag), off)
  if not rec then
    return U64_ZERO
  end
  local len, rpid = alloc_parse(rec)
  if rpid ~= pid then
    return U64_ZERO
  end
  redis.call('HDEL', K.alloc(stag), off)
  redis.call('ZREM', K.pending(stag), off)
  local allocated = redis.call('HGET', K.info(stag), F.info.allocated) or U64_ZERO
  redis.call('HSET', K.info(stag), F.info.allocated, u64_sub(allocated, len) or U64_ZERO)
  alloc_insert_free(stag, off, len)
  return len
end

-- Segment batch scripts: KEYS holds the first segment anchor on a cluster (every anchor on
-- standalone Redis); ARGV: group count, then per group: anchor (<segment tag>:info), n, items.
local function each_segment(fn)
  local groups = argn()
  for _ = 1, groups do
    local anchor = arg()
    local n = argn()
    fn(K.tag(anchor), anchor, n)
  end
end
