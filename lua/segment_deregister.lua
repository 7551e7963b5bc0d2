#!lua flags=allow-oom
-- segment_deregister: last step of an unmount: drops the registry entry if it still names the
-- client that was unmounted (a concurrent re-mount by another client keeps its entry).
-- KEYS: [1] <global tag>:segments (HASH segment id -> client id).
-- ARGV: segment id, client id ('' = whatever client).
-- Returns: 1 if dropped, 0 otherwise.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and (ARGV[2] == '' or cur == ARGV[2]) then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
