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
--          row}...}; status 'ok' | 'gone' (no node or no keys) | 'hard' | 'lease' | 'busy',
--          row as evict_candidates (empty unless 'ok'; its parent as the node stores it).
-- Errors: none.
--!include evict.lua

local now = now_ms()
local out = {}
for _, g in ipairs(evict_groups(2)) do
  for _, it in ipairs(g.items) do
    local chain = {}
    local tag, shard, h = g.tag, g.shard, it[1]
    local depth = tonumber(it[2])
    for _ = 1, depth do
      local node = evict_node_read(tag, h)
      local st, b, o, soft = evict_leaf_state(tag, h, now, true, node)
      local nc = node and node.nc or 0
      if st ~= 'ok' then
        table.insert(chain, { st, nc, shard, {} })
        break
      end
      local row = evict_leaf_row(tag, h, b, o, soft, node)
      table.insert(chain, { st, nc, shard, row })
      local p, ps = row[7], tonumber(row[8])
      if nc ~= 1 or p == '' or not ps or ps < 0 then
        break
      end
      p = radix_parent_hash(p)
      local ptag = K.shard(tag, ps)
      if not evict_local(ptag) then
        break
      end
      tag, shard, h = ptag, ps, p
    end
    table.insert(out, chain)
  end
end
return out
