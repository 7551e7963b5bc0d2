#!lua flags=no-writes,allow-cross-slot-keys
-- segment_usage: the used ratio's read in one call on a single Redis (where one script reaches
-- every segment and shard): the registry's segment ids and each one's segment_info row, instead
-- of an HKEYS of the registry, then segment_info; and what eviction left pending in every shard
-- (evict_pending's counts), so that an eviction pass started from this read needs none of its
-- own (one EXISTS when nothing is pending).
-- KEYS: the segment registry (<global tag>:segments, HASH).
-- ARGV: shard 0's anchor (<shard tag>:stats), the shard count (0: the pending counts are not
--       read).
-- Returns: {{segment id...}, {per id: segment_info's row ({} if unknown)},
--          {unlinks, outbox, orphans} summed over every shard (nil when not read)}.
-- Errors: none.
-- Idempotent: yes.
--!include alloc.lua
--!include pending.lua

local gtag = K.tag(KEYS[1])
local ids = redis.call('HKEYS', KEYS[1])
local rows = {}
for i, id in ipairs(ids) do
  rows[i] = segment_info_row(K.info(K.segment(gtag, id)))
end
local shards = tonumber(ARGV[2])
if shards == 0 then
  return { ids, rows, false }
end
local tag0, tags = K.tag(ARGV[1]), {}
for shard = 0, shards - 1 do
  tags[#tags + 1] = K.shard(tag0, shard)
end
local pending = { 0, 0, 0 }
for _, c in ipairs(pending_counts(tags, true)) do
  pending[1], pending[2], pending[3] = pending[1] + c[1], pending[2] + c[2], pending[3] + c[3]
end
return { ids, rows, pending }
