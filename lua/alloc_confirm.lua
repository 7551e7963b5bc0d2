#!lua flags=allow-cross-slot-keys,allow-oom
-- alloc_confirm: the janitor found the owner object referencing these allocations (or their free
-- already scheduled): they stop being pending (the record's ms is emptied), and the index score
-- of each bucket touched is set to its oldest pending ms again. A record that is gone, or now
-- carries another put id, is left alone.
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: group count, then per group: anchor, n, then n pairs (offset (u64 hex), put id).
-- Returns: confirmed count.
-- Errors: none.
-- Idempotent: yes (a confirmed record stays confirmed).
--!include alloc.lua

local done = 0
each_segment(function(stag, anchor, n)
  local seg = alloc_seg(stag)
  local touched, order = {}, {}
  for _ = 1, n do
    local off, pid = arg(), arg()
    if seg.ak and u64_valid(off) then
      local b, rel = alloc_bucket(off, seg.ak)
      local rec = redis.call('HGET', K.alloc(stag, b), rel)
      if rec then
        local rpid, ms, a, bar = alloc_parse_pid(rec)
        if rpid == pid and ms then
          -- "len|pid|": the record's own start when its len has no leading zero (as written)
          local val
          if a == 2 or string.byte(rec, 1) ~= 48 then
            val = string.sub(rec, 1, bar)
          else
            val = u64_short(u64_pad(string.sub(rec, 1, a - 1))) .. '|' .. pid .. '|'
          end
          redis.call('HSET', K.alloc(stag, b), rel, val)
          seg.np = seg.np - 1
          seg.dirty = true
          done = done + 1
          if not touched[b] then
            touched[b] = true
            table.insert(order, b)
          end
        end
      end
    end
  end
  for _, b in ipairs(order) do
    alloc_index_refresh(stag, b)
  end
  alloc_flush(seg)
end)
return done
