#!lua flags=allow-oom
-- segment_unmount_begin: first step of UnmountSegment: the segment stops allocating (mounted=0)
-- and stops counting as capacity. Then the caller drops the replicas that its alloc records name
-- (segment_drop) and deletes the allocator (segment_unmount_end). Resumable: re-running on a
-- segment already being unmounted is fine. With the ownership check (config
-- unmount_check_owner), only the client that mounted the segment may unmount it.
-- KEYS: [1] <segment tag>:info (HASH).
-- ARGV: client id, check owner (0/1).
-- Returns: {0 (unknown segment) | 1 (unmounting) | 2 (refused: another client's segment),
--          client id of the segment or ''}.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local cur = redis.call('HGET', KEYS[1], 'client_id')
if not cur then
  return { 0, '' }
end
if ARGV[2] == '1' and cur ~= ARGV[1] then
  return { 2, cur }
end
redis.call('HSET', KEYS[1], 'mounted', 0)
return { 1, cur }
