#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_unlinks_ack: drops journaled unlink continuations that have been run (by value; running
-- one twice is harmless: radix_unlink checks the edge generation).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n journal entries.
-- Returns: entries removed.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

return lrem_groups(K.unlinks)
