#!lua flags=no-writes,allow-cross-slot-keys
-- evict_leaf_info: read step of radix eviction for named nodes (parents that became leaves in
-- this pass): whether each may be evicted now, as evict_candidates decides.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n node hashes.
-- Returns: one entry per hash in ARGV order: {status, row}, status 'ok' | 'gone' | 'inner' |
--          'hard' | 'lease' | 'busy', row as evict_candidates (empty unless 'ok').
-- Errors: none.
--!include evict.lua

local now = now_ms()
local out = {}
for _, g in ipairs(evict_groups(1)) do
  for _, it in ipairs(g.items) do
    local h = it[1]
    local node = evict_node(g.tag, h)
    local st, b, o, soft = evict_leaf_state(g.tag, h, now, false, node)
    local z = st == 'ok' and redis.call('ZSCORE', K.leaves(g.tag), h)
    if z then
      table.insert(out, { st, evict_leaf_row(g.tag, h, b, o, soft, node, z) })
    else
      table.insert(out, { st == 'ok' and 'gone' or st, {} })
    end
  end
end
return out
