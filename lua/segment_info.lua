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
each_segment(function(stag, anchor, n)
  local f = redis.call('HMGET', anchor, 'name', 'base', 'size', 'te_endpoint', 'protocol',
    'client_id', 'allocated', 'mounted', F.info.allocations, F.info.pending)
  if not f[3] then
    table.insert(out, {})
  else
    table.insert(out, f)
  end
end)
return out
