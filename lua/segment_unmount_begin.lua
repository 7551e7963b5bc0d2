#!lua flags=allow-oom
-- segment_unmount_begin: first step of UnmountSegment: the segment stops allocating (mounted=0)
-- and stops counting as capacity. Then the caller drops the replicas that its alloc records name
-- (segment_drop) and deletes the allocator (segment_unmount_end). Resumable: re-running on a
-- segment already being unmounted is fine.
-- KEYS: [1] <segment tag>:info (HASH).
-- ARGV: none.
-- Returns: {0 (unknown segment) | 1 (unmounting), client id or ''}.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local cur = redis.call('HGET', KEYS[1], 'client_id')
if not cur then
  return { 0, '' }
end
redis.call('HSET', KEYS[1], 'mounted', 0)
return { 1, cur }
