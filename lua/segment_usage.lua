#!lua flags=no-writes,allow-cross-slot-keys
-- segment_usage: the used ratio's read in one call on a single Redis (where one script reaches
-- every segment): the registry's segment ids and each one's segment_info row, instead of an
-- HKEYS of the registry, then segment_info.
-- KEYS: the segment registry (<global tag>:segments, HASH).
-- ARGV: none.
-- Returns: {{segment id...}, {per id: segment_info's row ({} if unknown)}}.
-- Errors: none.
-- Idempotent: yes.
--!include alloc.lua

local gtag = K.tag(KEYS[1])
local ids = redis.call('HKEYS', KEYS[1])
local rows = {}
for i, id in ipairs(ids) do
  rows[i] = segment_info_row(K.info(K.segment(gtag, id)))
end
return { ids, rows }
