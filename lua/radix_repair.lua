#!lua flags=allow-cross-slot-keys,allow-oom
-- radix_repair: fsck --repair steps inside one shard.
-- "collapse": delete a node with no keys and no children (and cascade as radix_unregister);
-- "leaf": put a node in or out of the leaf index according to its keys and children;
-- "unparent:<parent>": break a parent cycle at this node: it forgets its parent (if that is
-- still <parent>) and becomes a root; the parent's edge is dropped by the continuation.
-- Dangling edges are dropped with radix_unlink (generation-checked), not here.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (operation, node hash).
-- Returns: {repaired count, {continuation...}} as radix_unregister.
-- Errors: none (unknown operations are ignored and not counted).
-- Idempotent: yes.
--!include radix.lua

local fixed, conts = 0, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local op, h = arg(), arg()
    if op == 'collapse' then
      radix_collapse(tag, shard, h, conts)
      fixed = fixed + 1
    elseif op == 'leaf' then
      radix_refresh_leaf(tag, h)
      fixed = fixed + 1
    elseif string.sub(op, 1, 9) == 'unparent:' then
      local f = redis.call('HMGET', K.node(tag, h), F.node.parent, F.node.parent_shard, F.node.link_gen, F.node.created_ms)
      local p = radix_parent_hash(f[1])
      if p and p ~= '' and p == string.sub(op, 10) then
        redis.call('HSET', K.node(tag, h), F.node.parent, '', F.node.parent_shard, '-1', F.node.link_gen, '0')
        table.insert(conts, { p, f[2], h, radix_link_gen(f[1], f[3], f[4]) })
        fixed = fixed + 1
      end
    end
  end
end)
return { fixed, conts }
