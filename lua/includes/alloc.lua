-- Segment allocator inside ONE segment tag (stag). Needs keys.lua, errors.lua, common.lua,
-- u64.lua.
--
-- Every offset and length is a u64 (16 hex characters, see u64.lua): no Lua number, no ZSET
-- score (a double) ever holds one. Best fit over free extents kept in two lexicographically
-- ordered ZSETs (every score 0, ZRANGEBYLEX): free_off members are offset .. length (neighbours
-- by offset), free_len members are length .. offset (best fit: the smallest length >= size,
-- lowest offset among equals). O(log n) per call. alloc HASH: offset -> "len|put id|ms|owner
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

-- Best-fit allocation of size bytes (u64). Returns the offset (u64), or nil when no extent is
-- large enough.
local function alloc_take(stag, size, owner, pid, now)
  local c = redis.call('ZRANGEBYLEX', K.free_len(stag), '[' .. size, '+', 'LIMIT', 0, 1)[1]
  if not c then
    return nil
  end
  local len, off = string.sub(c, 1, 16), string.sub(c, 17, 32)
  alloc_del_free(stag, off, len)
  if len > size then
    alloc_add_free(stag, u64_add(off, size), u64_sub(len, size))
  end
  redis.call('HSET', K.alloc(stag), off, size .. '|' .. pid .. '|' .. string.format('%d', now) .. '|' .. owner)
  redis.call('ZADD', K.pending(stag), now, off)
  local allocated = redis.call('HGET', K.info(stag), F.info.allocated) or U64_ZERO
  redis.call('HSET', K.info(stag), F.info.allocated, u64_add(allocated, size))
  return off
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
