#!lua flags=allow-cross-slot-keys
-- radix_link: parent-side step of registering children (link parent-first).
-- Adds the edge parent -> child in the parent's shard, creating a shell parent if needed, and
-- takes the parent out of the leaf index. The child's own shard is written afterwards
-- (radix_register / put_start) with the generation returned here.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (parent hash, child hash).
-- Returns: array of link generations (integer, ms since epoch, strictly increasing per edge),
--          one per pair, in ARGV order.
-- Errors: none (inputs are validated by the caller).
--!include keys.lua
--!include errors.lua
--!include common.lua
--!include radix.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local parent, child = arg(), arg()
    table.insert(out, radix_link_edge(tag, parent, child, now))
  end
end)
return out
