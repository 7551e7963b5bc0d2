-- What eviction left pending, per shard: journaled unlink steps not yet run, frees waiting in
-- the outbox, orphan roots. Read by evict_pending and, on a single Redis, by the used ratio's
-- read (segment_usage), which an eviction pass starts from: the pass then needs no read of its
-- own. Needs keys.lua (common.lua).
--!include common.lua

-- Per tag, in order: {unlinks (LLEN), outbox (LLEN), orphans (ZCARD)}; {} when one is true (a
-- single Redis, where one command may name keys of every slot) and EXISTS over every shard's
-- three keys found none (the common case: a pass drains what it journals; one EXISTS per 1,000
-- shards, within unpack's limit). A shard with nothing pending costs one EXISTS over its three
-- keys (one slot).
local function pending_counts(tags, one)
  local out = {}
  if one then
    local found = 0
    for i = 1, #tags, 1000 do
      local keys = {}
      for j = i, math.min(i + 999, #tags) do
        local tag = tags[j]
        keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = K.unlinks(tag), K.outbox(tag), K.orphans(tag)
      end
      found = found + redis.call('EXISTS', unpack(keys))
    end
    if found == 0 then
      return out
    end
  end
  for _, tag in ipairs(tags) do
    if redis.call('EXISTS', K.unlinks(tag), K.outbox(tag), K.orphans(tag)) == 0 then
      out[#out + 1] = { 0, 0, 0 }
    else
      out[#out + 1] = {
        redis.call('LLEN', K.unlinks(tag)),
        redis.call('LLEN', K.outbox(tag)),
        redis.call('ZCARD', K.orphans(tag)),
      }
    end
  end
  return out
end
