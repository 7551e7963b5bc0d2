#!lua
-- meta_check: records the schema version and shard count on first use, or returns the recorded
-- ones so that a process with other settings refuses to start instead of corrupting data.
-- KEYS[1]: <global tag>:meta (HASH: schema_version, num_shards, created_ms)
-- ARGV: schema version, shard count.
-- Returns: {recorded schema version, recorded shard count} (equal to ARGV on first use).
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

if redis.call('HSETNX', KEYS[1], 'schema_version', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'num_shards', ARGV[2], 'created_ms', now_ms())
end
return redis.call('HMGET', KEYS[1], 'schema_version', 'num_shards')
