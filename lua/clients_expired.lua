#!lua flags=no-writes
-- clients_expired: janitor read: segments whose client is silent longer than the live ttl (or
-- unknown), and the expired clients.
-- KEYS: [1] <global tag>:segments (HASH segment id -> client id), [2] <global tag>:clients (ZSET).
-- ARGV: client live ttl ms, limit.
-- Returns: {now ms, {segment id, client id, ...}, {expired client id, ...}}.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local now = now_ms()
local cutoff = now - tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local segs = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local last = redis.call('ZSCORE', KEYS[2], all[i + 1])
  if (not last or tonumber(last) < cutoff) and #segs < 2 * limit then
    table.insert(segs, all[i])
    table.insert(segs, all[i + 1])
  end
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', cutoff), 'LIMIT', 0, limit)
return { now, segs, expired }
