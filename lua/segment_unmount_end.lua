#!lua flags=allow-oom
-- segment_unmount_end: deletes an unmounting segment's allocator, once every replica its alloc
-- records named has been dropped (or vetoed) in the object shards: up to limit record buckets
-- per call (the caller calls again while it answers 2; the info counters lose what each call
-- deleted, so a crash between calls leaves a consistent segment), then the info, free extents
-- and index.
-- KEYS: [1] <segment tag>:info (HASH).
-- ARGV: limit (record buckets deleted per call).
-- Returns: 1 if deleted, 2 if buckets remain (call again), 0 if the segment is unknown or
--   mounted (a re-mount won).
-- Errors: none.
-- Idempotent: yes.
--!include alloc.lua

local stag = K.tag(KEYS[1])
if redis.call('HGET', KEYS[1], 'mounted') ~= '0' then
  return 0
end
local index = K.alloc_index(stag)
local buckets = redis.call('ZRANGE', index, 0, tonumber(ARGV[1]) - 1)
local seg = alloc_seg(stag)
for _, b in ipairs(buckets) do
  for _, r in ipairs(alloc_bucket_records(redis.call('HGETALL', K.alloc(stag, b)))) do
    seg.allocated = u64_sub(seg.allocated, r[2]) or U64_ZERO
    seg.n = seg.n - 1
    if r[4] then
      seg.np = seg.np - 1
    end
  end
  redis.call('DEL', K.alloc(stag, b))
end
if #buckets > 0 then
  variadic('ZREM', index, buckets)
  if redis.call('EXISTS', index) == 1 then
    seg.dirty = true
    alloc_flush(seg)
    return 2
  end
end
redis.call('DEL', KEYS[1], K.free_off(stag), K.free_len(stag), index)
return 1
