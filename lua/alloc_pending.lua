#!lua flags=no-writes,allow-cross-slot-keys
-- alloc_pending: janitor read of allocations not yet confirmed and older than a cutoff.
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: cutoff (ms; entries allocated at or before it), limit per segment, then group count,
--       then per group: anchor, 0.
-- Returns: per group: {offset (u64 hex), record "len|put id|ms|owner key", ...}.
-- Errors: none.
--!include alloc.lua

local cutoff, limit = argn(), argn()
local out = {}
each_segment(function(stag, anchor, n)
  local offs = redis.call('ZRANGEBYSCORE', K.pending(stag), '-inf', cutoff, 'LIMIT', 0, limit)
  local row = {}
  for _, off in ipairs(offs) do
    local rec = redis.call('HGET', K.alloc(stag), off)
    if rec then
      table.insert(row, off)
      table.insert(row, rec)
    end
  end
  table.insert(out, row)
end)
return out
