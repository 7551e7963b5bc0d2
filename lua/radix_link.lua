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
  -- Per parent, read once per call (one HMGET): whether its block is stored and not an
  -- orphan, whether it is rooted (linking changes neither), its edge to the first child, its
  -- child count; its leaf entry goes once (one variadic ZREM). Per pair one HSET: the edge,
  -- the child count when the edge is new, tiered: the parent exposed.
  local seen, acc = {}, radix_acc()
  local exposing = radix_tier_state(tag) -- tiered: a parent that had a child is exposed
  for _ = 1, n do
    local parent, child = arg(), arg()
    local cf = arg()
    radix_child_field_is(child, cf)
    local p = seen[parent]
    local gen = now
    local old = nil -- the edge's last generation (nil: a new edge)
    local write = true
    if not p then
      local f = redis.call('HMGET', K.node(tag, parent), F.node.parent, F.node.nkeys, '.', F.node.exposed, F.node.nchildren, cf)
      local pp = f[1]
      local stored = 0
      if pp then
        if f[2] == '1' and f[3] then -- one key, the block hash itself (MLA): no key walk
          stored = redis.call('HGET', K.obj(tag, parent), F.obj.status) == 'C' and 1 or 0
        else
          stored = radix_block_stored(tag, parent)
        end
        if stored == 1 and redis.call('ZSCORE', K.orphans(tag), parent) then
          stored = 0
        end
      end
      -- kids: the generations this call gave the parent's edges; a parent created here has no
      -- other edge, so its edges' last generations need no read.
      p = { stored, (not pp or pp == '') and 1 or 0, kids = {}, fresh = not pp,
        nc = tonumber(f[5]) or 0, exposed = f[4] == '1' }
      seen[parent] = p
      if pp then
        table.insert(acc.unleaf, parent) -- a new node is in no index yet
        old = tonumber(f[6])
      else
        -- A new parent and its first edge (generation now) in one HSET.
        local w = { cf, radix_ms(gen), F.node.nchildren, '1' }
        if exposing then
          w[5], w[6] = F.node.exposed, '1'
        end
        radix_create(tag, parent, now, acc, w)
        p.nc, p.exposed, write = 1, true, false
      end
    else
      old = p.kids[child]
      if not old and not p.fresh then
        old = tonumber(radix_child_gen(tag, parent, child))
      end
    end
    if write then
      -- The edge: a generation above the edge's last one (radix_link_edge, less its reads).
      if old and old >= gen then
        gen = old + 1
      end
      local w = { cf, gen }
      if not old then
        p.nc = p.nc + 1
        w[3], w[4] = F.node.nchildren, p.nc
      end
      if exposing and not p.exposed then
        w[#w + 1], w[#w + 2] = F.node.exposed, '1'
        p.exposed = true
      end
      redis.call('HSET', K.node(tag, parent), unpack(w))
    end
    p.kids[child] = gen
    table.insert(out, { gen, p[1], p[2] })
  end
  radix_flush(tag, acc)
end)
return out
