#!lua flags=allow-oom
-- meta_check: records the schema version, shard count and radix setting on first use, or
-- returns the recorded ones so that a process with other settings refuses to start instead of
-- corrupting data (a worker without the radix index would store children whose parents are
-- absent; another shard count would put keys in other shards).
-- KEYS[1]: <global tag>:meta (HASH: schema_version, num_shards, radix, created_ms)
-- ARGV: schema version, shard count, radix ('1' or '0').
-- Returns: {recorded schema version, recorded shard count, recorded radix, created ms} (equal
--          to ARGV on first use).
-- Errors: none.
-- Idempotent: yes.
--!include meta.lua

return meta_record(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
