-- Shared helpers: the Redis clock and a cursor over ARGV for batch scripts.
-- Needs: keys.lua, errors.lua (included before this file by every script).

-- Redis's clock in milliseconds: the same on every worker (leases mean one thing).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Batch scripts take, for every KEYS[i] (a shard anchor), ARGV: shard index, item count, items.
local cursor = { i = 0 }
local function arg()
  cursor.i = cursor.i + 1
  return ARGV[cursor.i]
end
local function argn()
  return tonumber(arg())
end
