#!lua flags=allow-cross-slot-keys,allow-oom
-- alloc_pending: janitor read of allocations not yet confirmed and made at or before a cutoff.
-- Reads the buckets whose index score (a lower bound of their oldest pending ms) is due, at
-- most limit buckets and about limit records per segment, and sets each bucket's score to its
-- exact oldest pending ms (+inf when none: a bucket whose pending records were freed or
-- confirmed meanwhile is not read again). Cost per segment: one ZRANGEBYSCORE, then per bucket
-- read one HGETALL (<= 128 fields for one object size) and one ZADD.
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: cutoff (ms; entries allocated at or before it), limit per segment, then group count,
--       then per group: anchor, 0.
-- Returns: per group: {offset (u64 hex), record "len|put id|ms", owner (records.alloc_owner
--          encoding), ...}.
-- Errors: none.
-- Idempotent: yes (it only corrects index scores).
--!include alloc.lua

local cutoff, limit = argn(), argn()
local out = {}
each_segment(function(stag, anchor, n)
  local row = {}
  local seg = alloc_seg(stag)
  if seg.ak then
    local due = redis.call('ZRANGEBYSCORE', K.alloc_index(stag), '-inf', cutoff, 'LIMIT', 0, limit)
    for _, b in ipairs(due) do
      if #row >= 3 * limit then
        break
      end
      local flat = redis.call('HGETALL', K.alloc(stag, b))
      local owners = {}
      for i = 1, #flat, 2 do
        owners[flat[i]] = flat[i + 1]
      end
      local recs, oldest = alloc_bucket_records(flat)
      for _, r in ipairs(recs) do
        if r[4] and r[4] <= cutoff then
          table.insert(row, alloc_offset(b, r[1], seg.ak))
          table.insert(row, r[5])
          table.insert(row, owners[r[1] .. 'k'] or '')
        end
      end
      alloc_index_set(stag, b, oldest)
    end
  end
  table.insert(out, row)
end)
return out
