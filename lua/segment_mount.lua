#!lua
-- segment_mount: creates a segment's allocator (one free extent [0, size)). Idempotent: a
-- mounted segment is left as it is.
-- KEYS: [1] <segment tag>:info (HASH name, base, size, te_endpoint, protocol, client_id,
--       allocated, mounted, allocations, pending, ak); free_off/free_len, the record buckets
--       and their index are derived from its tag (alloc.lua).
-- ARGV: name, base (u64 hex), size (bytes, u64 hex), te_endpoint, protocol, client id.
-- Returns: {code, message, client id of the mounted segment}.
-- Errors: UNAVAILABLE_IN_CURRENT_STATUS (-1010) while the segment is being unmounted,
--   INVALID_PARAMS (-600) for a malformed base or size.
-- Idempotent: yes.
--!include alloc.lua

local stag = K.tag(KEYS[1])
local cur = redis.call('HMGET', KEYS[1], 'mounted', 'client_id')
if cur[1] == '1' then
  return { E.OK, 'already mounted', cur[2] }
end
if cur[1] then
  return { E.UNAVAILABLE_IN_CURRENT_STATUS, 'segment: being unmounted, retry later', cur[2] }
end
if not u64_valid(ARGV[2]) or not u64_valid(ARGV[3]) or ARGV[3] == U64_ZERO then
  return { E.INVALID_PARAMS, 'segment: base and size must be u64 hex, size > 0', '' }
end
alloc_init(stag, ARGV[3])
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'base', ARGV[2], 'size', ARGV[3],
  'te_endpoint', ARGV[4], 'protocol', ARGV[5], 'client_id', ARGV[6], 'allocated', U64_ZERO,
  'mounted', 1, 'mounted_ms', now_ms(), F.info.allocations, 0, F.info.pending, 0)
return { E.OK, '', ARGV[6] }
