#!lua flags=no-writes,allow-cross-slot-keys
-- evict_pending: what an eviction pass may have to do before choosing leaves, in one read:
-- per shard, the journaled unlink steps an evictor left undone, the frees waiting in the
-- outbox and the orphan roots. A pass runs the unlink journal, the outbox drain and the orphan
-- phase only where a count is not 0 (each of them reads nothing but those keys).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: one read (1: a single Redis, where one command may name keys of every slot; 0:
--       a cluster node); then the groups: count, then per group: anchor, shard index, 0 (or
--       their compact form: '*', shard 0's anchor, shard count, 0; common.lua each_group).
-- Returns: per group: {unlinks (LLEN), outbox (LLEN), orphans (ZCARD)}; {} when one read
--          found nothing pending in any shard.
-- Errors: none.
-- Idempotent: yes.
--!include pending.lua

local one = argn() == 1
local tags = {}
each_group(function(tag)
  tags[#tags + 1] = tag
end)
return pending_counts(tags, one)
