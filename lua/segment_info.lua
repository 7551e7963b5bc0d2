#!lua flags=no-writes,allow-cross-slot-keys
-- segment_info: reads segments' info (usage ratio, janitor, fsck).
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: group count, then per group: anchor, 0.
-- Returns: per group: {} if unknown, else {name, base, size, te_endpoint, protocol, client_id,
--          allocated, mounted, alloc record count, pending count}; base, size and allocated
--          are u64 hex.
-- Errors: none.
--!include alloc.lua

local out = {}
each_segment(function(_, anchor)
  out[#out + 1] = segment_info_row(anchor)
end)
return out
