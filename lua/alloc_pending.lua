#!lua flags=no-writes,allow-cross-slot-keys
-- alloc_pending: janitor read of allocations not yet confirmed and older than a cutoff.
-- KEYS: one <segment tag>:info (HASH) per segment, all served by one node.
-- ARGV: cutoff (ms; entries allocated at or before it), limit per segment.
-- Returns: per KEYS[i]: {offset, record "len|put id|ms|owner key", ...}.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local cutoff, limit = argn(), argn()
local out = {}
for i = 1, #KEYS do
  local stag = K.tag(KEYS[i])
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
end
return out
