#!lua flags=allow-cross-slot-keys
-- radix_link: parent-side step of registering children (link parent-first).
-- Adds the edge parent -> child in the parent's shard, creating a shell parent if needed, and
-- takes the parent out of the leaf index. The child's own shard is written afterwards
-- (radix_register / put_start) with the generation returned here.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n triples (parent hash, child
--       hash, the child's edge field: keys.node_child_field, so the script does not derive it).
-- Returns: one {generation, parent stored, parent rooted} per pair, in ARGV order: the link
--          generation
--          (integer, ms since epoch, strictly increasing per edge) and 1 when the parent's block
--          was completely stored when the edge was made and the parent is not an orphan (then
--          it cannot be evicted while the edge stands: a put that sees 1 cannot create an
--          orphan, nor grow an orphaned subtree from its root), else 0; rooted 1 when the
--          parent has no parent of its own (new, a root, a shell): a put of it with a parent
--          must pass the cycle check (the caller does it before that commit).
-- Cost: per pair one HSET (the edge, the child count, tiered: exposed); a new parent is
--   created with its first edge in one HSET; per distinct parent one HMGET (node, edge, child
--   count) and the block-stored read (one HGET for a block of one key named by its hash); per
--   shard one ZREM of the leaf index (parents that existed) and one HINCRBY of the node count.
-- Errors: none (inputs are validated by the caller).
-- Idempotent: yes (a resend bumps the edge to a newer generation, which the child records).
--!include radix.lua

local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  -- Per parent one read per call, per pair one HSET (radix_link_pair); the parents' leaf
  -- entries go in one variadic ZREM.
  local seen, acc = {}, radix_acc()
  local exposing = radix_tier_state(tag) -- tiered: a parent that had a child is exposed
  for _ = 1, n do
    local parent, child = arg(), arg()
    local gen, stored, rooted = radix_link_pair(tag, parent, child, arg(), seen, acc, exposing, now)
    table.insert(out, { gen, stored, rooted })
  end
  radix_flush(tag, acc)
end)
return out
