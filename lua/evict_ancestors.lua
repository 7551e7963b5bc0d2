#!lua flags=no-writes,allow-cross-slot-keys
-- evict_ancestors: read step of radix eviction for the parents of chosen leaves: for each named
-- node, then up its chain while a node has exactly one child and its parent's shard is on this
-- node, what the node would be as a leaf once its children are gone: whether it may be evicted
-- then, its child count and its candidate row. The evictor thus sees a parent the moment its
-- last child is chosen and keeps exact leaf order along deep chains without a read per level.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs: node hash, max nodes
--       to read up its chain.
-- Returns: one chain per hash in ARGV order, the named node first: {{status, children, shard,
--          row...}...}; status 'ok' | 'gone' (no node or no keys) | 'hard' | 'lease' | 'busy',
--          the row's fields (as evict_candidates' row; its parent as the node stores it) in the
--          same entry after the shard, none unless 'ok'.
-- Errors: none.
--!include evict.lua

local now = now_ms()
local out = {}
for _, g in ipairs(evict_groups(2)) do
  for _, it in ipairs(g.items) do
    table.insert(out, evict_chain(g.tag, g.shard, it[1], tonumber(it[2]), now))
  end
end
return out
