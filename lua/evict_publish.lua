#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_publish: after a radix eviction pass, the tiered leaf policy's clocks in each shard's
-- stats: the turnover (blocks stored now) and the logical clock (blocks evicted so far, raised
-- by this pass's evicted leaves). Puts and hits stamp their nodes with the clock, and index
-- scores count protections in turnovers (radix_leaf_score).
-- Fenced: refused as a whole when the evictor lease is over or a shard saw a newer epoch.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: epoch, lease expiry ms, turnover ('' = the sum of the call's shards' nodes
--       counters: only for a call that covers every shard), evicted leaves; then group count,
--       then per group: anchor, shard index, 0.
-- Returns: 1, or 0 when fenced.
-- Errors: none.
--!include evict.lua

local epoch, expires = argn(), argn()
local turnover = arg()
local evicted = argn()
local groups = evict_groups(0)
-- One read of each shard's stats (fence, nodes, clock) and one write (turnover, clock, the
-- raised fence).
if not evict_fence(groups, epoch, expires, now_ms(), { F.stats.nodes, F.stats.clock }, true) then
  return 0
end
local rows = {}
for i, g in ipairs(groups) do
  rows[i] = { g.stats[2], g.stats[3] }
end
evict_publish_clocks(groups, rows, turnover, evicted, epoch)
return 1
