#!lua flags=allow-cross-slot-keys
-- put_precheck: for puts that got no buffer: does the key exist (and is not a stale put that
-- could be taken over)? Then the answer is OBJECT_ALREADY_EXISTS, as Mooncake checks existence
-- before allocating. Also adopts the radix edge its link step bumped when the node already
-- names that parent (see store_adopt_edge), and, for a put its commit would have linked and
-- guarded (put_start's generation 'g'), applies the put guard to its parent block.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: discard timeout ms; then group count, then per group: anchor, shard index, n, then n items
--       (key, prefix hash, parent as its node stores it ('' none, '>' + 32 bytes:
--       keys.node_parent_field), link generation or 0, guard (0/1: apply the put guard)).
-- Returns: per item {1 (exists, not stale) or 0, edge adopted 0/1, orphan 0/1 (guard: the
--          parent block is not completely stored, or is an orphan; 0 without the guard)}.
-- Errors: none.
-- Idempotent: yes.
--!include store.lua

local discard = argn()
local now = now_ms()
local out = {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key, prefix, parent, gen, guard = arg(), arg(), arg(), arg(), arg()
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.created_ms, F.obj.replicas, F.obj.put_id)
    local hit = 0
    if f[3] and (store_any_complete(store_replicas(f[2])) or tonumber(f[1]) + discard > now) then
      hit = 1
    end
    local orphan = 0
    if guard == '1' and parent ~= '' then
      orphan = 1 - radix_node_stored(tag, radix_parent_hash(parent))
    end
    table.insert(out, { hit, store_adopt_edge(tag, prefix, parent, gen), orphan })
  end
end)
return out
