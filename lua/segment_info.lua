#!lua flags=no-writes,allow-cross-slot-keys
-- segment_info: reads segments' info (usage ratio, janitor, fsck).
-- KEYS: one <segment tag>:info (HASH) per segment.
-- ARGV: none.
-- Returns: per KEYS[i]: {} if unknown, else {name, base, size, te_endpoint, protocol, client_id,
--          allocated, mounted, alloc record count, pending count}.
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua

local out = {}
for i = 1, #KEYS do
  local stag = K.tag(KEYS[i])
  local f = redis.call('HMGET', KEYS[i], 'name', 'base', 'size', 'te_endpoint', 'protocol',
    'client_id', 'allocated', 'mounted')
  if not f[3] then
    table.insert(out, {})
  else
    table.insert(f, redis.call('HLEN', K.alloc(stag)))
    table.insert(f, redis.call('ZCARD', K.pending(stag)))
    table.insert(out, f)
  end
end
return out
