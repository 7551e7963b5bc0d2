#!lua flags=allow-cross-slot-keys,allow-oom
-- get_replicas: GetReplicaList: the COMPLETE replicas of each key, granting a lease:
-- lease timeout = max(lease timeout, now + ttl); soft pin refreshed the same way; the lru index
-- and the radix leaf score follow (store_grant_leases, batched per shard). allow-oom: a read
-- must work when Redis is full (it only rewrites fields of existing keys). An object whose
-- status is COMPLETE has a COMPLETE replica (put_end marks them all, segment_drop sets the
-- status back when none is left), so only other objects' replicas are decoded. The record goes
-- back as it is stored, with the segment-table entries it names (no cjson, no decode here):
-- Python reads both (lua_calls.store.get_replicas, the format in store.lua).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: lease ttl ms, soft pin ttl ms, radix flag (0/1); then group count, then per group: anchor, shard index, n, n keys.
-- Returns: per key {code, message, replica record (field r), lease timeout ms (a decimal string), then per segment
-- ref in the record: ref, its segment-table entry (cjson [seg, base, ep, proto, name])}.
-- Errors (per key): OBJECT_NOT_FOUND (-704), REPLICA_IS_NOT_READY (-703) without a COMPLETE replica.
-- Idempotent: yes (a lease grant is a max).
--!include store.lua

local ttl, soft_ttl, radix_on = argn(), argn(), argn()
local now = now_ms()
local out = {}
local reads = store_grant_reads(radix_on, F.obj.replicas, F.obj.status)
local hits, fs, found, okeys = {}, {}, {}, {} -- reused by every shard: its first m entries
each_group(function(tag, shard, n)
  local m = 0
  local c = args_span(n)
  for j = c + 1, c + n do
    local key = ARGV[j]
    local okey, f = store_grant_read(tag, key, reads)
    if not f[6] then -- the replicas, then the status, after the grant fields
      out[#out + 1] = { E.OBJECT_NOT_FOUND, 'key ' .. key .. ': object not found' }
    elseif f[7] ~= 'C' and not store_any_complete(store_replicas(f[6])) then
      out[#out + 1] = { E.REPLICA_IS_NOT_READY, 'key ' .. key .. ': no COMPLETE replica' }
    else
      local entry = { E.OK, '', f[6], 0 }
      store_record_segments(tag, f[6], entry)
      out[#out + 1] = entry
      m = m + 1
      found[m], hits[m], fs[m], okeys[m] = entry, key, f, okey
    end
  end
  for i, lease in ipairs(store_grant_leases(tag, hits, fs, now, ttl, soft_ttl, okeys, reads.nf, m)) do
    found[i][4] = lease
  end
end)
return out
