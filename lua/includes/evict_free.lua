-- An eviction call's buffer frees applied in the call itself, on a single Redis (where one
-- script reaches every shard and segment tag): what the outbox and outbox_apply would do right
-- after, atomically with the eviction, so no round trip and no outbox entry in between. A
-- cluster keeps the outbox (a segment tag may be on another node).
--!include evict.lua
--!include alloc.lua

-- The segment tag of segment id seg (K.segment, from a shard tag), or false for an id no
-- mounted segment can have (KeySchema.segment_tag refuses an empty id
-- or one with a brace; its length limit counts characters, which Lua cannot: every id that
-- was mounted passed it, so none is checked here).
local function evict_segment_tag(tag, seg)
  if seg == '' or string.find(seg, '[{}]') then
    return false
  end
  return K.segment(tag, seg)
end

-- Applies frees ({shard, 'segment id|offset|put id'}...) to their segments' allocators, as
-- alloc_free does (a record goes only with its put id), and removes from the shards' outboxes
-- the entries store_erase pushed there: all but those in queued (entry -> true: the block-leaf
-- path's, which evict_flush was told not to push).
-- Each entry carries its parts (seg, off padded to 16 digits, pid: store_erase,
-- evict_block_leaf), so none is parsed back; one without them is a bug, refused loudly.
local function evict_free_here(tag, frees, queued)
  local by, order, stags = {}, {}, {}
  for _, f in ipairs(frees) do
    local e = f[2]
    local seg, off, pid = f.seg, f.off, f.pid
    if not seg then
      error('evict_free_here: free entry without its parts: ' .. tostring(e))
    end
    local stag = stags[seg]
    if stag == nil then
      stag = evict_segment_tag(tag, seg)
      stags[seg] = stag
    end
    if stag and #off <= 16 then
      local items = by[stag]
      if not items then
        items = {}
        by[stag] = items
        order[#order + 1] = stag
      end
      items[#items + 1] = { off, pid }
    end
    if not queued[e] then
      redis.call('LREM', K.outbox(K.shard(tag, f[1])), 1, e)
    end
  end
  for _, stag in ipairs(order) do
    alloc_release_batch(stag, by[stag])
    alloc_flush(alloc_seg(stag))
  end
end
