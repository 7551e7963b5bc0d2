#!lua flags=allow-cross-slot-keys,allow-oom
-- alloc_confirm: the janitor found the owner object referencing these allocations (or their free
-- already scheduled): they leave the pending set. Stale entries (record gone or another put id)
-- are dropped from pending too if their record is gone.
-- KEYS: segment anchors (<segment tag>:info, HASH) served by one node; only the first on a
--       cluster (the script reads every anchor from ARGV).
-- ARGV: group count, then per group: anchor, n, then n pairs (offset (u64 hex), put id).
-- Returns: confirmed count.
-- Errors: none.
-- Idempotent: yes (removes pending entries).
--!include alloc.lua

local done = 0
each_segment(function(stag, anchor, n)
  for _ = 1, n do
    local off, pid = arg(), arg()
    local rec = redis.call('HGET', K.alloc(stag), off)
    if not rec then
      redis.call('ZREM', K.pending(stag), off)
    else
      local _, rpid = alloc_parse(rec)
      if rpid == pid then
        done = done + redis.call('ZREM', K.pending(stag), off)
      end
    end
  end
end)
return done
