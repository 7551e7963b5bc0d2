#!lua flags=allow-cross-slot-keys,allow-oom
-- radix_repair: fsck --repair steps inside one shard.
-- "collapse": delete a node with no keys and no children (and cascade as radix_unregister);
-- "leaf": put a node in or out of the leaf index according to its keys and children.
-- Dangling edges are dropped with radix_unlink (generation-checked), not here.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (operation, node hash).
-- Returns: {repaired count, {continuation...}} as radix_unregister.
-- Errors: none (unknown operations are ignored and not counted).
-- Idempotent: yes.
--!include keys.lua
--!include errors.lua
--!include common.lua
--!include radix.lua

local fixed, conts = 0, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local op, h = arg(), arg()
    if op == 'collapse' then
      radix_collapse(tag, shard, h, conts)
      fixed = fixed + 1
    elseif op == 'leaf' then
      radix_refresh_leaf(tag, h)
      fixed = fixed + 1
    end
  end
end)
return { fixed, conts }
