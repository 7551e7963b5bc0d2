#!lua flags=allow-cross-slot-keys,allow-oom
-- alloc_free: applies buffer frees to segment allocators (outbox drains, failed puts, janitor
-- reclaims). Idempotent: a free is applied only if the alloc record at that offset carries the
-- same put id; unknown segments and offsets are skipped. Per segment: one read and one write of
-- its counters; per record bucket touched one read, one delete and one EXISTS; per run of
-- neighbouring frees one free-extent merge (alloc_release_batch).
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: group count, then per group: anchor, n, then n pairs (offset (u64 hex), put id).
-- Returns: bytes freed (decimal string).
-- Errors: none.
-- Idempotent: yes (a free applies only to a record with its put id).
--!include alloc.lua

return alloc_free_groups()
