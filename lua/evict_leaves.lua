#!lua flags=allow-cross-slot-keys,allow-oom
-- evict_leaves: write step of radix eviction: evicts whole leaves, each atomically: re-checks
-- that it is still a leaf (no child: a parent that gained a child survives) and that every key
-- may be evicted now, then erases every stored key (buffer frees to the shard outbox, keys
-- unregistered) and unregisters the keys registered but not stored. The node collapses and is
-- unlinked from its parent in the same call when the parent's shard is on this node (always on
-- a single Redis), so a parent named after its children is evicted in the same call too (items
-- found 'inner' are retried while others go); a parent on another node comes back as a
-- continuation. Each continuation is also journaled in the shard's unlinks LIST until the
-- caller has run it (evict_unlinks_ack), so that a successor finishes the cascade of an evictor
-- that died. On a single Redis (ARGV here = 1) the frees are applied to the segments' allocators
-- in this call (evict_free.lua) instead of going through the outbox, and the call ends with the
-- used ratio's read of the given segments (what the pass would read next).
-- Fenced: refused as a whole when the evictor lease is over or a shard saw a newer epoch.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: epoch, lease expiry ms, allow soft-pinned (0/1), here (1: apply the frees in this
--       call, a single Redis only), segment count m and m segment anchors (<segment tag>:info)
--       to read after the frees (here only), then the clocks' ask (here only, and only from a
--       caller whose groups cover every shard): leaves the pass evicted and did not publish yet
--       (-1: no ask), the goal's used ratio, bytes still to free (may be <= 0) and objects
--       still to evict ('': the goal is in bytes); then group count, then per group:
--       anchor, shard index, n, then n items of leaf hash, pick position (children before
--       their parents: the leaves are tried in that order, so a parent chosen with its
--       children finds them gone on its first try).
-- Returns: {1, {per leaf, flat: status, keys unregistered, bytes, parent (as its node stores
--          it), parent shard, erased key count m, m erased object keys} (flat: Redis probes
--          every table of a reply for seven special fields before it writes it as an array),
--          {continuation...}, {{shard, outbox entry}...} (none when here), now ms,
--          {{shard, journal entry}...}, {per segment anchor: its segment_info row ({} when
--          unknown)}, published (1: the pass's goal is met after this call and the tiered
--          policy's clocks were published as evict_publish does, for the leaves asked plus this
--          call's)}, or {0} when fenced.
--          status: 'ok' (evicted) or why not ('gone', 'inner', 'hard', 'lease', 'busy', 'soft').
-- Errors: none.
--!include evict_free.lua

local epoch, expires, allow_soft, here = argn(), argn(), argn(), argn()
local usage = {}
for i = 1, argn() do
  usage[i] = arg()
end
local ask = { leaves = argn(), ratio = argn(), bytes = argn(), objects = arg() }
local now = now_ms()
local groups = evict_groups(2)
-- The fence read also takes each shard's tier state (radix_tier_prime: the parents made leaves
-- here are scored with it), and shows the shard is on this node (radix_local_is).
if not evict_fence(groups, epoch, expires, now, { F.stats.tier_offsets, F.stats.turnover, F.stats.clock }) then
  return { 0 }
end
for _, g in ipairs(groups) do
  radix_tier_prime(g.tag, g.stats[2], g.stats[3], g.stats[4])
  radix_local_is(g.tag)
end
local out, conts, frees, journal = {}, {}, {}, {}
local pending = {}
-- Per shard, written once at the end: its evicted_keys / evicted_bytes counters, and the
-- deferred writes of the leaves evicted whole with one DEL (evict_block_leaf, evict_flush):
-- {keys, bytes, acc, bytes as a number} (the bytes: evict_sum_add's two parts).
local evicted, tags, nleaves = {}, {}, 0
for _, g in ipairs(groups) do
  for _, it in ipairs(g.items) do
    table.insert(pending, { g.tag, g.shard, it[1], #pending + 1, tonumber(it[2]) })
  end
end
table.sort(pending, function(a, b) return a[5] < b[5] end)
-- A parent chosen with its children becomes a leaf once they are gone: items found 'inner' are
-- tried again after every round that evicted something.
repeat
  local retry, progress = {}, false
  for _, e in ipairs(pending) do
    local tag, shard, h, idx = e[1], e[2], e[3], e[4]
    -- One HGETALL of the node: its child count, keys, parent and the block key's object.
    local node = evict_node(tag, h)
    local st, held, _, soft = evict_leaf_state(tag, h, now, false, node)
    if st == 'ok' and soft and allow_soft ~= 1 then
      st = 'soft'
    end
    if st == 'inner' then
      table.insert(retry, e)
    elseif st ~= 'ok' then
      out[idx] = { st, 0, '0', '', '-1' }
    else
      local p = { node.f[3], node.f[4] }
      local mine, before = {}, #conts
      local acc = evicted[tag]
      if not acc then
        acc = { 0, '0', evict_acc(), 0 }
        evicted[tag] = acc
        tags[#tags + 1] = tag
      end
      local erased, nkeys, bytes = evict_block_leaf(tag, shard, h, node, held, frees, acc[3], mine)
      if not erased then
        erased, nkeys, bytes = evict_leaf(tag, shard, h, mine, frees, node.keys)
      end
      evict_unlink_local(tag, mine, conts)
      for c = before + 1, #conts do
        local j = cjson.encode(conts[c])
        redis.call('RPUSH', K.unlinks(tag), j)
        table.insert(journal, { shard, j })
      end
      acc[1] = acc[1] + #erased
      evict_sum_add(acc, 2, 4, bytes)
      local row = { 'ok', nkeys, bytes, p[1] or '', p[2] or '-1' }
      for k = 1, #erased do
        row[5 + k] = erased[k]
      end
      out[idx] = row
      progress, nleaves = true, nleaves + 1
    end
  end
  pending = retry
until not progress or #pending == 0
for _, e in ipairs(pending) do
  out[e[4]] = { 'inner', 0, '0', '', '-1' }
end
local queued = {} -- the block-leaf path's entries, not pushed when applied here
for _, tag in ipairs(tags) do
  local acc = evicted[tag]
  evict_flush(tag, acc[3], acc[1], evict_sum(acc, 2, 4), here == 1)
  if here == 1 then
    for _, e in ipairs(acc[3].outbox) do
      queued[e] = true
    end
  end
end
if here == 1 then
  if #frees > 0 then
    evict_free_here(groups[1].tag, frees, queued)
    frees = {}
  end
  for i, anchor in ipairs(usage) do
    usage[i] = segment_info_row(anchor)
  end
else
  usage = {}
end
-- The pass's goal met after this call: the clocks published now save the pass a call.
local published = 0
if here == 1 and ask.leaves >= 0 and evict_goal_met(ask, tags, evicted, usage) then
  evict_publish_now(groups, ask.leaves + nleaves)
  published = 1
end
-- The rows flat, in ARGV order (pending is free now).
pending = {}
for i = 1, #out do
  local row, n = out[i], #pending
  for k = 1, 5 do
    pending[n + k] = row[k]
  end
  pending[n + 6] = #row - 5
  for k = 6, #row do
    pending[n + k + 1] = row[k]
  end
end
return { 1, pending, conts, frees, now, journal, usage, published }
