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
      local owners = nil -- field -> value, built only if an owner field is not where written
      local oldest = nil
      for i = 1, #flat, 2 do
        local field = flat[i]
        if string.byte(field, -1) ~= 107 then -- a record, not an owner field ('k')
          local rec = flat[i + 1]
          local _, ms = alloc_parse_pid(rec)
          if ms and (not oldest or ms < oldest) then
            oldest = ms
          end
          if ms and ms <= cutoff then
            local fk = field .. 'k'
            local owner
            if flat[i + 2] == fk then -- alloc_take writes rel, record, rel .. 'k', owner
              owner = flat[i + 3]
            else
              if not owners then
                owners = {}
                for j = 1, #flat, 2 do
                  owners[flat[j]] = flat[j + 1]
                end
              end
              owner = owners[fk] or ''
            end
            row[#row + 1] = alloc_offset(b, field, seg.ak)
            row[#row + 1] = rec
            row[#row + 1] = owner
          end
        end
      end
      alloc_index_set(stag, b, oldest)
    end
  end
  table.insert(out, row)
end)
return out
