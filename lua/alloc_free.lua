#!lua flags=allow-cross-slot-keys,allow-oom
-- alloc_free: applies buffer frees to segment allocators (outbox drains, failed puts, janitor
-- reclaims). Idempotent: a free is applied only if the alloc record at that offset carries the
-- same put id; unknown segments and offsets are skipped.
-- KEYS: one <segment tag>:info (HASH) per segment touched, all served by one node.
-- ARGV: for each KEYS[i]: n, then n pairs (offset, put id).
-- Returns: bytes freed (integer).
-- Errors: none.
--!include keys.lua
--!include errors.lua
--!include common.lua
--!include alloc.lua

local freed = 0
for i = 1, #KEYS do
  local stag = K.tag(KEYS[i])
  local n = argn()
  for _ = 1, n do
    local off, pid = argn(), arg()
    freed = freed + alloc_release(stag, off, pid)
  end
end
return freed
