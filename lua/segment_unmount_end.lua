#!lua flags=allow-oom
-- segment_unmount_end: deletes an unmounting segment's allocator, once every replica its alloc
-- records named has been dropped (or vetoed) in the object shards.
-- KEYS: [1] <segment tag>:info (HASH).
-- ARGV: none.
-- Returns: 1 if deleted, 0 if the segment is unknown or mounted (a re-mount won).
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local stag = K.tag(KEYS[1])
if redis.call('HGET', KEYS[1], 'mounted') ~= '0' then
  return 0
end
redis.call('DEL', KEYS[1], K.free_off(stag), K.free_len(stag), K.alloc(stag), K.pending(stag))
return 1
