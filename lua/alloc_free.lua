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

-- The sum freed: freed (decimal) + freedn (a number below 2^52, exact; lengths past that go
-- to the decimal at once).
local freed, freedn = '0', 0
each_segment(function(stag, anchor, n)
  local items = {}
  for i = 1, n do
    items[i] = { arg(), arg() }
  end
  for _, len in ipairs(alloc_release_batch(stag, items)) do
    local v = u64_small(len)
    if v then
      freedn = freedn + v
      if freedn >= 4503599627370496 then -- 2^52
        freed, freedn = dec_add(freed, string.format('%d', freedn)), 0
      end
    else
      freed = dec_add(freed, u64_to_dec(len))
    end
  end
  alloc_flush(alloc_seg(stag))
end)
if freedn > 0 then
  freed = dec_add(freed, string.format('%d', freedn))
end
return freed
