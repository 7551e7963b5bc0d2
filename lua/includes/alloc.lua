-- Segment allocator inside ONE segment tag (stag). Needs keys.lua, errors.lua, common.lua.
--
-- Best fit over free extents kept in two ZSETs (member = offset as a decimal string):
-- free_off scores the offset, free_len the length. alloc HASH: offset -> "len|put id|ms|owner key"
-- (the owner key last: it may contain '|'). pending ZSET: offset -> alloc ms, allocations not yet
-- confirmed by the janitor. info.allocated = sum of the lengths in alloc.

local function istr(n)
  return string.format('%d', n)
end

-- "len|pid|ms|owner" -> len, pid, ms, owner
local function alloc_parse(rec)
  local a = string.find(rec, '|', 1, true)
  local b = string.find(rec, '|', a + 1, true)
  local c = string.find(rec, '|', b + 1, true)
  return tonumber(string.sub(rec, 1, a - 1)), string.sub(rec, a + 1, b - 1),
    tonumber(string.sub(rec, b + 1, c - 1)), string.sub(rec, c + 1)
end

-- Inserts the free extent [off, off + len), merging it with free neighbours.
local function alloc_insert_free(stag, off, len)
  local fo, fl = K.free_off(stag), K.free_len(stag)
  local prev = redis.call('ZREVRANGEBYSCORE', fo, '(' .. istr(off), '-inf', 'LIMIT', 0, 1)
  if prev[1] then
    local poff = tonumber(prev[1])
    local plen = tonumber(redis.call('ZSCORE', fl, prev[1]))
    if poff + plen == off then
      redis.call('ZREM', fo, prev[1])
      redis.call('ZREM', fl, prev[1])
      off, len = poff, len + plen
    end
  end
  local nxt = redis.call('ZRANGEBYSCORE', fo, '(' .. istr(off), '+inf', 'LIMIT', 0, 1)
  if nxt[1] and tonumber(nxt[1]) == off + len then
    len = len + tonumber(redis.call('ZSCORE', fl, nxt[1]))
    redis.call('ZREM', fo, nxt[1])
    redis.call('ZREM', fl, nxt[1])
  end
  local m = istr(off)
  redis.call('ZADD', fo, off, m)
  redis.call('ZADD', fl, len, m)
end

-- Best-fit allocation of size bytes. Returns the offset, or nil when no extent is large enough.
local function alloc_take(stag, size, owner, pid, now)
  local fo, fl = K.free_off(stag), K.free_len(stag)
  local c = redis.call('ZRANGEBYSCORE', fl, size, '+inf', 'LIMIT', 0, 1)
  if not c[1] then
    return nil
  end
  local off = tonumber(c[1])
  local len = tonumber(redis.call('ZSCORE', fl, c[1]))
  redis.call('ZREM', fo, c[1])
  redis.call('ZREM', fl, c[1])
  if len > size then
    local rest = istr(off + size)
    redis.call('ZADD', fo, off + size, rest)
    redis.call('ZADD', fl, len - size, rest)
  end
  local m = istr(off)
  redis.call('HSET', K.alloc(stag), m, istr(size) .. '|' .. pid .. '|' .. istr(now) .. '|' .. owner)
  redis.call('ZADD', K.pending(stag), now, m)
  redis.call('HINCRBY', K.info(stag), 'allocated', size)
  return off
end

-- Frees the allocation at off if its record carries put id pid (idempotent: a second free, or a
-- free of an offset reused by another put, does nothing). Returns the freed length (0 if none).
local function alloc_release(stag, off, pid)
  local m = istr(off)
  local rec = redis.call('HGET', K.alloc(stag), m)
  if not rec then
    return 0
  end
  local len, rpid = alloc_parse(rec)
  if rpid ~= pid then
    return 0
  end
  redis.call('HDEL', K.alloc(stag), m)
  redis.call('ZREM', K.pending(stag), m)
  redis.call('HINCRBY', K.info(stag), 'allocated', -len)
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
