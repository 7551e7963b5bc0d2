#!lua
-- segment_mount: creates a segment's allocator (one free extent [0, size)). Idempotent: a
-- mounted segment is left as it is.
-- KEYS: [1] <segment tag>:info (HASH name, base, size, te_endpoint, protocol, client_id,
--       allocated, mounted); free_off/free_len/alloc/pending are derived from its tag.
-- ARGV: name, base (decimal string, bytes), size (bytes), te_endpoint, protocol, client id.
-- Returns: {code, message, client id of the mounted segment}.
-- Errors: UNAVAILABLE_IN_CURRENT_STATUS (-1010) while the segment is being unmounted.
--!include keys.lua
--!include errors.lua
--!include common.lua

local stag = K.tag(KEYS[1])
local cur = redis.call('HMGET', KEYS[1], 'mounted', 'client_id')
if cur[1] == '1' then
  return { E.OK, 'already mounted', cur[2] }
end
if cur[1] then
  return { E.UNAVAILABLE_IN_CURRENT_STATUS, 'segment: being unmounted, retry later', cur[2] }
end
redis.call('DEL', K.free_off(stag), K.free_len(stag), K.alloc(stag), K.pending(stag))
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'base', ARGV[2], 'size', ARGV[3],
  'te_endpoint', ARGV[4], 'protocol', ARGV[5], 'client_id', ARGV[6], 'allocated', 0,
  'mounted', 1, 'mounted_ms', now_ms())
redis.call('ZADD', K.free_off(stag), 0, '0')
redis.call('ZADD', K.free_len(stag), ARGV[3], '0')
return { E.OK, '', ARGV[6] }
