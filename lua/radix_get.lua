#!lua flags=no-writes,allow-cross-slot-keys
-- radix_get: reads nodes (GetKeysByPrefix, and one level of GetSubtreeKeys or fsck).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n prefix hashes.
-- Returns: one entry per hash in ARGV order: {} when there is no node, else
--          {parent, parent shard, generation, created ms, score, hits, {keys...},
--           {child, generation, child, generation, ...}}.
-- Errors: none.
--!include radix.lua

local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local h = arg()
    local f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.parent_shard, F.node.link_gen, F.node.created_ms, F.node.score, F.node.hits)
    if not f[1] then
      table.insert(out, {})
    else
      local keys = radix_keys(tag, h)
      local children = radix_children(tag, h)
      table.insert(out, { radix_parent_hash(f[1]), f[2], radix_link_gen(f[1], f[3], f[4]), f[4], f[5], f[6] or '0', keys, children })
    end
  end
end)
return out
