#!lua
-- segment_register: global step of MountSegment (before the allocator is created, so that a
-- crash leaves a visible registry entry, never an invisible allocator). Also marks the client
-- alive (a hearing tick). Refused while the janitor is expiring the client (its old segments
-- are being unmounted; a mount now could be undone by that unmount): the client retries.
-- KEYS: [1] <global tag>:segments (HASH segment id -> client id), [2] <global tag>:clients (ZSET
--       client id -> last ping ms), [3] <global tag>:expiring (ZSET client id -> claim ms),
--       [4] <global tag>:heartbeat (HASH).
-- ARGV: segment id, client id, gap ms.
-- Returns: {code, message}.
-- Errors: UNAVAILABLE_IN_CURRENT_STATUS (-1010) while the client is being expired.
-- Idempotent: yes.
--!include heartbeat.lua

if redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  return { E.UNAVAILABLE_IN_CURRENT_STATUS,
    'client ' .. ARGV[2] .. ' is being expired (its segments are being unmounted); retry' }
end
local now = now_ms()
hb_hear(KEYS[4], tonumber(ARGV[3]), now)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[2])
return { E.OK, '' }
