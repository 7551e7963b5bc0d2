#!lua flags=allow-oom
-- clients_remove: janitor: forgets expired clients once their segments are unmounted; a client
-- that pinged meanwhile is kept.
-- KEYS: [1] <global tag>:clients (ZSET client id -> last ping ms).
-- ARGV: cutoff ms, then client ids.
-- Returns: clients removed.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local cutoff = tonumber(ARGV[1])
local removed = 0
for i = 2, #ARGV do
  local last = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if last and tonumber(last) < cutoff then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
