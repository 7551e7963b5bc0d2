#!lua flags=allow-cross-slot-keys,allow-oom
-- exist: ExistKey: 1 for a key with a COMPLETE replica (a hit grants a lease, as
-- get_replicas), 0 otherwise (missing or still being written). Per shard: one HMGET per key
-- (an MLA key's reads its node too: only present fields at rad '1', store_grant_read), then
-- the hits' grants batched (store_grant_leases).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: lease ttl ms, soft pin ttl ms, radix flag (0/1); then group count, then per group: anchor, shard index, n, n keys.
-- Returns: per key 1 or 0.
-- Errors: none.
-- Idempotent: yes (a lease grant is a max).
--!include store.lua

local ttl, soft_ttl, radix_on = argn(), argn(), argn()
local now = now_ms()
local out = {}
local reads = store_grant_reads(radix_on, F.obj.status)
local o = 0
local hits, fs, okeys = {}, {}, {} -- reused by every shard: its first m entries are its hits
each_group(function(tag, shard, n)
  local m = 0
  local c = args_span(n)
  for j = c + 1, c + n do
    local key = ARGV[j]
    local okey, f = store_grant_read(tag, key, reads)
    o = o + 1
    if f[6] == 'C' then -- the status, after the grant fields
      m = m + 1
      hits[m], fs[m], okeys[m] = key, f, okey
      out[o] = 1
    else
      out[o] = 0
    end
  end
  store_grant_leases(tag, hits, fs, now, ttl, soft_ttl, okeys, reads.nf, m)
end)
return out
