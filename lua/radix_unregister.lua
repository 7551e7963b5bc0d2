#!lua flags=allow-cross-slot-keys,allow-oom
-- radix_unregister: removes registered keys from their nodes (child-first unlink, step 1).
-- A node left with no keys and no children is deleted, and so upward is every parent in the
-- same shard that becomes an empty shell; parents in other shards come back as continuations.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (prefix hash, key).
-- Returns: {removed count, {continuation...}}, continuation = {parent, parent shard, child, gen},
--          to be passed to radix_unlink in the parent's shard.
-- Errors: none (unknown keys are skipped). A stored object whose key is removed loses its
--         "registered" mark (rad) in the same step and, when COMPLETE and not hard pinned,
--         enters the lru index (which holds only objects of no tree).
--!include radix.lua

local removed, conts = 0, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local h, key = arg(), arg()
    local gone = radix_remove_key(tag, shard, h, key, conts)
    if gone == 1 then
      -- A stored object whose key leaves the tree is no longer "in a tree" (BatchEvict
      -- fallback applies to it); a key registered but not stored has no object.
      local okey = K.obj(tag, key)
      local f = redis.call('HMGET', okey, F.obj.put_id, F.obj.status, F.obj.hard_pin, F.obj.lease_ms)
      if f[1] then
        redis.call('HDEL', okey, F.obj.radix)
        if f[2] == 'C' and f[3] ~= '1' then -- now of no tree: BatchEvict's lru index has it
          redis.call('ZADD', K.lru(tag), tonumber(f[4]) or 0, key)
        end
        radix_lost_object(tag, shard, h, conts, now_ms())
      end
    end
    removed = removed + gone
  end
end)
return { removed, conts }
