#!lua flags=allow-cross-slot-keys,allow-oom
-- radix_unlink: parent-side step of an unlink (unlink child-first, step 2), and the cascade.
-- Drops the edge parent -> child when its generation still matches (a child re-linked meanwhile
-- keeps its edge); a parent left with keys becomes a leaf, one left empty is deleted and the walk
-- continues upward.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n items (parent hash, child hash, generation).
-- Returns: {dropped edge count, {continuation...}} as radix_unregister.
-- Errors: none.
--!include radix.lua

local dropped, conts = 0, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local parent, child, gen = arg(), arg(), arg()
    dropped = dropped + radix_unlink_edge(tag, shard, parent, child, gen, conts)
  end
end)
return { dropped, conts }
