#!lua flags=allow-cross-slot-keys,allow-oom
-- outbox_ack: drops applied frees from shards' outboxes (by value: concurrent drains of the
-- same entries are harmless, alloc_free being idempotent).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n entries.
-- Returns: entries removed.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

return lrem_groups(K.outbox)
