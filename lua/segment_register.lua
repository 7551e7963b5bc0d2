#!lua
-- segment_register: global step of MountSegment (before the allocator is created, so that a
-- crash leaves a visible registry entry, never an invisible allocator). Also marks the client
-- alive.
-- KEYS: [1] <global tag>:segments (HASH segment id -> client id), [2] <global tag>:clients (ZSET
--       client id -> last ping ms).
-- ARGV: segment id, client id.
-- Returns: 1.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now_ms(), ARGV[2])
return 1
