-- Exact unsigned 64-bit integers, and unbounded decimal counters. Needs: nothing (plain Lua).
--
-- Lua 5.1 numbers are doubles, exact only below 2^53, and cjson keeps 14 significant digits, so
-- no 64-bit value (an offset, a length, a segment base or size) may pass through a Lua number
-- unless it is known to be below 2^52 (u64_small: exact, and so is a sum of two; the
-- allocator's fast paths). A u64 is a 16-character lowercase hex string: fixed width, so string order is numeric order
-- (usable as a lexicographically ordered ZSET member, ZRANGEBYLEX). Arithmetic works on two
-- 32-bit halves, each exact in a double (and in the Lua 5.4 integers of other runtimes).

local U64_ZERO = '0000000000000000'
local TWO32 = 4294967296

local function u64_valid(x)
  return type(x) == 'string' and #x == 16 and string.find(x, '^[0-9a-f]+$') ~= nil
end

local function u64_split(x)
  return tonumber(string.sub(x, 1, 8), 16), tonumber(string.sub(x, 9, 16), 16)
end

local function u64_join(hi, lo)
  return string.format('%08x%08x', hi, lo)
end

-- x as a Lua number when below 2^52, else nil: exact, and a sum of two such stays exact (below
-- 2^53). The fast paths of the allocator work on these and keep the u64 strings past them.
local U64_SMALL = '0010000000000000'
local function u64_small(x)
  if x < U64_SMALL then
    return tonumber(x, 16)
  end
  return nil
end

-- A non-negative integer number n <= 2^53 (exact) as a u64.
local function u64_of(n)
  return string.format('%016x', n)
end

-- An integer number in [0, 2^32) as 8 hex digits: LuaBitOp's bit.tohex where the runtime has
-- it (Redis: about half the instructions of string.format), string.format otherwise (fakeredis).
local hex8 = (bit and bit.tohex) or function(x)
  return string.format('%08x', x)
end

-- An integer number in [0, 2^32) as hex without leading zeros ('0' for zero), as
-- string.format('%x', x) writes it (by bit.tohex where the runtime has it).
local function hex_short(x)
  if not bit then
    return string.format('%x', x)
  end
  local d, t = 1, 16
  while x >= t and d < 8 do
    d, t = d + 1, t * 16
  end
  return bit.tohex(x, d)
end

-- a + b, or nil past 2^64 - 1 (callers add within a segment: offset + length <= size).
local function u64_add(a, b)
  local ah, al = u64_split(a)
  local bh, bl = u64_split(b)
  local lo, hi = al + bl, ah + bh
  if lo >= TWO32 then
    lo, hi = lo - TWO32, hi + 1
  end
  if hi >= TWO32 then
    return nil
  end
  return u64_join(hi, lo)
end

-- a - b, or nil when b > a.
local function u64_sub(a, b)
  if b > a then
    return nil
  end
  local ah, al = u64_split(a)
  local bh, bl = u64_split(b)
  local lo, hi = al - bl, ah - bh
  if lo < 0 then
    lo, hi = lo + TWO32, hi - 1
  end
  return u64_join(hi, lo)
end

-- a * m + c for small non-negative integers m, c (below 2^20), or nil past 2^64 - 1.
local function u64_muladd(a, m, c)
  local ah, al = u64_split(a)
  local lo = al * m + c
  local carry = math.floor(lo / TWO32)
  local hi = ah * m + carry
  if hi >= TWO32 then
    return nil
  end
  return u64_join(hi, lo - carry * TWO32)
end

-- A decimal string below 2^64 as a u64, or nil.
local function u64_from_dec(s)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') or #s > 20 then
    return nil
  end
  if #s <= 15 then -- below 2^53: exact as a number
    local n = tonumber(s)
    local hi = math.floor(n / TWO32)
    return u64_join(hi, n - hi * TWO32)
  end
  local x = U64_ZERO
  for i = 1, #s, 5 do -- five digits at a time: 10^5 < 2^20
    local part = string.sub(s, i, i + 4)
    x = u64_muladd(x, 10 ^ #part, tonumber(part))
    if not x then
      return nil
    end
  end
  return x
end

-- A u64 as a decimal string.
local function u64_to_dec(x)
  local hi, lo = u64_split(x)
  if hi < 2097152 then -- below 2^53: exact as a number
    return string.format('%d', hi * TWO32 + lo)
  end
  local digits = {}
  while hi > 0 or lo > 0 do
    local rh = hi % 10
    hi = math.floor(hi / 10)
    local cur = rh * TWO32 + lo -- below 10 * 2^32: exact
    local r = cur % 10
    lo = math.floor(cur / 10)
    table.insert(digits, string.char(48 + r))
  end
  return string.reverse(table.concat(digits))
end

-- Unbounded non-negative decimal strings (counters that sum u64 values: bytes per shard).
-- Two strings of at most 15 digits add as numbers (below 2^53: exact); the digit loop is for
-- longer ones (about 250 VM instructions for two 4-digit strings, against 4 here).
local function dec_add(a, b)
  if #a <= 15 and #b <= 15 then
    return string.format('%d', tonumber(a) + tonumber(b))
  end
  local out, carry = {}, 0
  local i, j = #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local d = carry
    if i > 0 then
      d = d + string.byte(a, i) - 48
    end
    if j > 0 then
      d = d + string.byte(b, j) - 48
    end
    carry = d >= 10 and 1 or 0
    table.insert(out, string.char(48 + d - 10 * carry))
    i, j = i - 1, j - 1
  end
  return string.reverse(table.concat(out))
end

local function dec_trim(s)
  local t = string.gsub(s, '^0+', '')
  return t == '' and '0' or t
end

local function dec_lt(a, b)
  a, b = dec_trim(a), dec_trim(b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- max(a - b, 0). Strings of at most 15 digits subtract as numbers (exact), as dec_add adds.
local function dec_sub(a, b)
  if #a <= 15 and #b <= 15 then
    local x = tonumber(a) - tonumber(b)
    return x > 0 and string.format('%d', x) or '0'
  end
  if dec_lt(a, b) then
    return '0'
  end
  local out, borrow = {}, 0
  local i, j = #a, #b
  while i > 0 do
    local d = string.byte(a, i) - 48 - borrow
    if j > 0 then
      d = d - (string.byte(b, j) - 48)
    end
    borrow = d < 0 and 1 or 0
    table.insert(out, string.char(48 + d + 10 * borrow))
    i, j = i - 1, j - 1
  end
  return dec_trim(string.reverse(table.concat(out)))
end

-- Adds (or with negative = true subtracts, floored at 0) the decimal delta to a HASH counter.
-- One HINCRBY while the counter and the delta fit in 63 bits (always, in practice); past that
-- HINCRBY refuses without writing, and the counter goes on as an unbounded decimal string.
local function dec_hincr(key, field, delta, negative)
  if delta == '0' or delta == '' then
    return
  end
  if #delta <= 15 then
    local r = redis.pcall('HINCRBY', key, field, negative and ('-' .. delta) or delta)
    if type(r) ~= 'table' then
      if r < 0 then
        redis.call('HSET', key, field, 0)
      end
      return
    end
  end
  local cur = redis.call('HGET', key, field) or '0'
  redis.call('HSET', key, field, negative and dec_sub(cur, delta) or dec_add(cur, delta))
end
