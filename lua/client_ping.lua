#!lua
-- client_ping: Ping: a live client's last ping is refreshed. A client unknown or silent longer
-- than client_live_ttl is told to remount (its segments are, or will be, unmounted by the
-- janitor); it is not refreshed, so the janitor still expires it.
-- KEYS: [1] <global tag>:clients (ZSET client id -> last ping ms), [2] <global tag>:meta (HASH).
-- ARGV: client id, client live ttl ms.
-- Returns: {view version id (the namespace's created ms), 'OK' | 'NEED_REMOUNT'}.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local now = now_ms()
local view = redis.call('HGET', KEYS[2], 'created_ms') or '0'
local last = redis.call('ZSCORE', KEYS[1], ARGV[1])
if last and tonumber(last) + tonumber(ARGV[2]) >= now then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  return { view, 'OK' }
end
return { view, 'NEED_REMOUNT' }
