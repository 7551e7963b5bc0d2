#!lua flags=allow-cross-slot-keys
-- radix_link: parent-side step of registering children (link parent-first).
-- Adds the edge parent -> child in the parent's shard, creating a shell parent if needed, and
-- takes the parent out of the leaf index. The child's own shard is written afterwards
-- (radix_register / put_start) with the generation returned here.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (parent hash, child hash).
-- Returns: one {generation, parent stored, parent rooted} per pair, in ARGV order: the link
--          generation
--          (integer, ms since epoch, strictly increasing per edge) and 1 when the parent's block
--          was completely stored when the edge was made and the parent is not an orphan (then
--          it cannot be evicted while the edge stands: a put that sees 1 cannot create an
--          orphan, nor grow an orphaned subtree from its root), else 0; rooted 1 when the
--          parent has no parent of its own (new, a root, a shell): a put of it with a parent
--          must pass the cycle check (the caller does it before that commit).
-- Errors: none (inputs are validated by the caller).
-- Idempotent: yes (a resend bumps the edge to a newer generation, which the child records).
--!include radix.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local parent, child = arg(), arg()
    local stored = radix_block_stored(tag, parent)
    if stored == 1 and redis.call('ZSCORE', K.orphans(tag), parent) then
      stored = 0
    end
    local pp = redis.call('HGET', K.node(tag, parent), F.node.parent)
    local rooted = (not pp or pp == '') and 1 or 0
    table.insert(out, { radix_link_edge(tag, parent, child, now), stored, rooted })
  end
end)
return out
