#!lua flags=allow-oom
-- client_ping: Ping: a known client's last ping is refreshed, however long it was silent: the
-- janitor alone decides expiry, from the time the service heard (heartbeat.lua), so a client
-- whose record survived a Redis restart (AOF) or outage is revived, not told to remount. A
-- client unknown (never mounted, or expired: being expired by the janitor, or gone) is told to
-- remount. A ping is a hearing tick, and records the namespace meta again if it is gone.
-- allow-oom: a ping must work while Redis is full (it rewrites a score of an existing member),
-- or every client would be expired for the store's own condition.
-- KEYS: [1] <global tag>:clients (ZSET client id -> last ping ms), [2] <global tag>:meta (HASH),
--       [3] <global tag>:heartbeat (HASH).
-- ARGV: client id, schema version, shard count, radix ('1'/'0'), gap ms.
-- Returns: {view version id (the namespace's created ms), 'OK' | 'NEED_REMOUNT', recorded
--          schema version, recorded shard count, recorded radix}.
-- Errors: none.
-- Idempotent: yes.
--!include meta.lua
--!include heartbeat.lua

local now = now_ms()
local m = meta_record(KEYS[2], ARGV[2], ARGV[3], ARGV[4])
hb_hear(KEYS[3], tonumber(ARGV[5]), now)
local status = 'NEED_REMOUNT'
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  status = 'OK'
end
return { m[4] or '0', status, m[1], m[2], m[3] }
