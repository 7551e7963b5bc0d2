#!lua flags=allow-oom
-- parent_hints_put: the wire front end's parent inference: records, for each block of an
-- exists call that missed, the block before it as its parent, for a short time (a put of that
-- block through any worker reads it). Losing a hint only loses an edge, so this also runs
-- when Redis is out of memory.
-- KEYS: [1] <global tag>:meta (anchor of the global tag; hint keys derive from its tag).
-- ARGV: ttl ms, then pairs: child block hash, parent block hash.
-- Returns: the number of hints written.
-- Errors: none.
--!include common.lua

local gtag = K.tag(KEYS[1])
local ttl = argn()
local n = 0
while cursor.i < #ARGV do
  local child, parent = arg(), arg()
  redis.call('SET', K.g_parent_hint(gtag, child), parent, 'PX', ttl)
  n = n + 1
end
return n
