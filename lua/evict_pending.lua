#!lua flags=no-writes,allow-cross-slot-keys
-- evict_pending: what an eviction pass may have to do before choosing leaves, in one read:
-- per shard, the journaled unlink steps an evictor left undone, the frees waiting in the
-- outbox and the orphan roots. A pass runs the unlink journal, the outbox drain and the orphan
-- phase only where a count is not 0 (each of them reads nothing but those keys).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, 0.
-- Returns: per group: {unlinks (LLEN), outbox (LLEN), orphans (ZCARD)}.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local out = {}
each_group(function(tag, shard, n)
  -- Empty lists and sets do not exist: one EXISTS over the shard's three keys (one slot) is
  -- the whole read of a shard with nothing pending, the common case.
  if redis.call('EXISTS', K.unlinks(tag), K.outbox(tag), K.orphans(tag)) == 0 then
    table.insert(out, { 0, 0, 0 })
  else
    table.insert(out, {
      redis.call('LLEN', K.unlinks(tag)),
      redis.call('LLEN', K.outbox(tag)),
      redis.call('ZCARD', K.orphans(tag)),
    })
  end
end)
return out
