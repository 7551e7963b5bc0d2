#!lua flags=allow-cross-slot-keys,allow-oom
-- outbox_apply: alloc_free and outbox_ack as one step, on a single Redis (where one script
-- reaches every segment and every shard): applies outbox frees to their segments' allocators
-- and drops the entries from their shards' outboxes at once, so no crash falls between the
-- two (on a cluster they are two calls, and a crash between them leaves entries that the next
-- drain applies again, harmlessly).
-- KEYS: the segment anchors (<segment tag>:info, HASH), then the shard anchors
--       (<shard tag>:stats, HASH).
-- ARGV: the segment groups as alloc_free's: group count, then per group: anchor, n, then n
--       pairs (offset (u64 hex), put id); then the shard groups as outbox_ack's: group count,
--       then per group: anchor, shard index, n, then n outbox entries.
-- Returns: {bytes freed (decimal string), outbox entries removed}.
-- Errors: none.
-- Idempotent: yes (a free applies only to a record with its put id; entries go by value).
--!include alloc.lua

local freed = alloc_free_groups()
return { freed, lrem_groups(K.outbox) }
