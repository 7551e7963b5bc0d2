#!lua flags=allow-oom
-- evict_request: the durable "eviction needed" flag: a put got no buffer (value: ms), or Redis
-- refused a write for lack of memory (value: 'oom:' .. ms). The evictor reads it with its
-- lease and clears it after a pass that evicted something. allow-oom: it is set precisely when
-- Redis is full.
-- KEYS: [1] <global tag>:evict_needed (STRING).
-- ARGV: kind ('alloc' | 'oom').
-- Returns: the value set.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local v = string.format('%d', now_ms())
if ARGV[1] == 'oom' then
  v = 'oom:' .. v
end
redis.call('SET', KEYS[1], v)
return v
