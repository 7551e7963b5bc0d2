#!lua flags=allow-cross-slot-keys
-- radix_register: child-side step of RegisterRadixTreeNode (RFC Path B).
-- Creates or fills the node, records its parent (when known) with the edge generation from
-- radix_link, adds its keys and updates the leaf index. A node keeps its first known parent.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n items of
--       prefix hash, parent hash ('' = unknown), parent shard (-1 = none),
--       link generation (0 = none), cycle checked (0/1), key count m, then m keys.
-- Returns: array of {code, message}, one per item, in ARGV order.
-- Errors (per item): INVALID_PARAMS (-600) when the node already has a different parent;
--   1 (not a Mooncake code; nothing written) when the node exists without a parent and has
--   children and the cycle check was not done: the caller checks that the parent is not below
--   the node (radix_chain) and sends the item again with the check flag.
-- Idempotent: yes.
--!include radix.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local h, parent, pshard, gen, checked, m = arg(), arg(), arg(), arg(), argn(), argn()
    local keys = {}
    for j = 1, m do
      keys[j] = arg()
    end
    local code, msg = radix_attach(tag, h, radix_parent_field(parent), pshard, gen, keys, now, checked)
    table.insert(out, { code, msg })
  end
end)
return out
