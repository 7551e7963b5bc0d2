#!lua flags=no-writes,allow-cross-slot-keys
-- radix_chain: reads parent pointers up the tree from a node, through every shard this Redis
-- node serves, for the cycle check of a new parent link (mooncake_redis/cycles.py). Read only;
-- one call per Redis node a chain crosses (one in all on a single Redis), at most `max` nodes.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n items (start hash, max).
-- Returns: one flat list per item in ARGV order: node, its parent ('' = root or no node), node,
--          parent, ... from the start up; the last parent is on another Redis node, or the walk
--          reached max, or it is ''.
-- Errors: none.
--!include radix.lua

local out, here = {}, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local h, max = arg(), argn()
    local pairs = {}
    local ctag = tag
    for _ = 1, max do
      local f = redis.call('HMGET', K.node(ctag, h), F.node.parent, F.node.parent_shard)
      local p = radix_parent_hash(f[1]) or ''
      table.insert(pairs, h)
      table.insert(pairs, p)
      if p == '' then
        break
      end
      local ptag = K.shard(ctag, f[2])
      if here[ptag] == nil then
        here[ptag] = radix_local(ptag) -- once per shard and call
      end
      if not here[ptag] then
        break
      end
      h, ctag = p, ptag
    end
    table.insert(out, pairs)
  end
end)
return out
