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
--!include common.lua

local one = argn() == 1
local out = {}
local tags = {}
each_group(function(tag)
  tags[#tags + 1] = tag
end)
-- On a single Redis, one EXISTS over every shard's three keys is the whole read when nothing is
-- pending anywhere (the common case: a pass drains what it journals); a call with something
-- pending reads shard by shard below.
if one then
  local keys = {}
  for _, tag in ipairs(tags) do
    keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = K.unlinks(tag), K.outbox(tag), K.orphans(tag)
  end
  if #keys > 0 and redis.call('EXISTS', unpack(keys)) == 0 then
    return out
  end
end
for _, tag in ipairs(tags) do
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
end
return out
