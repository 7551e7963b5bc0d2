-- Shared helpers: the Redis clock and a cursor over ARGV for batch scripts.
-- Includes keys.lua, errors.lua and fields.lua, so every script that includes this has K, E, F.
--!include keys.lua
--!include errors.lua
--!include fields.lua

-- Redis's clock in milliseconds: the same on every worker (leases mean one thing).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- cmd key args... for a list of args (none: no call), in chunks: Lua's unpack has a stack limit.
-- A batch's writes to one shard key (ZADD, ZREM, SADD...) go as one call instead of one per item.
local function variadic(cmd, key, args)
  for i = 1, #args, 4000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end

-- A small ZSET (up to zset-max-listpack-entries, 128 by default: a batch's processing entries)
-- is one listpack that ZADD scans from its head for each new member's place, and ZREM for each
-- member to remove. Members of one score sorted, added in descending order, each find their place
-- before the batch's others at once; removed in ascending order, each is found first (a batch
-- of 128 in key order scanned half the list per member). Sorts members in place.
local function zadd_same_score(key, score, members)
  table.sort(members)
  local args, n = {}, #members
  for i = 1, n do
    args[2 * i - 1], args[2 * i] = score, members[n + 1 - i]
  end
  variadic('ZADD', key, args)
end
local function zrem_sorted(key, members)
  table.sort(members)
  variadic('ZREM', key, members)
end

-- Batch scripts: ARGV = group count, then per group: anchor key (<tag>:stats), shard index,
-- item count, items. KEYS holds the anchors too on standalone Redis, but only the first one on a
-- cluster (a cluster refuses declared keys of several slots; the allow-cross-slot-keys flag lets
-- the script reach the other slots of the same node). So scripts read anchors from ARGV.
local cursor = { i = 0 }
local function arg()
  cursor.i = cursor.i + 1
  return ARGV[cursor.i]
end
local function argn()
  return tonumber(arg())
end
-- The next n items, read in place: returns c, the items being ARGV[c + 1] .. ARGV[c + n] (a
-- batch script's per-key loop without a function call per key).
local function args_span(n)
  local c = cursor.i
  cursor.i = c + n
  return c
end

-- group.tag: the shard tag of the group being run (store_replicas/store_encode default to it).
-- The compact form of a call over every shard of a single Redis whose groups all hold the same
-- items (an eviction pass's reads and writes of every shard): '*', the anchor of shard 0, the
-- shard count, the item count, then the items once; each group reads them in turn, so a
-- script is the same for both forms. It spares Redis 64 x 3 ARGV strings (about a third of a
-- call that does little per shard) and the caller the building.
local group = { tag = nil }
local function each_group(fn)
  local groups = arg()
  if groups == '*' then
    local tag0, shards, n = K.tag(arg()), argn(), argn()
    local items, stop = cursor.i, cursor.i
    for shard = 0, shards - 1 do
      cursor.i = items
      group.tag = K.shard(tag0, shard)
      fn(group.tag, shard, n)
      stop = cursor.i
    end
    cursor.i = stop
    return
  end
  for _ = 1, tonumber(groups) do
    local anchor = arg()
    local shard = argn()
    local n = argn()
    group.tag = K.tag(anchor)
    fn(group.tag, shard, n)
  end
end

-- Each group's n items removed by value from its shard's list list_key(tag) (acknowledgements
-- of journal or outbox entries); returns how many were there.
local function lrem_groups(list_key)
  local removed = 0
  each_group(function(tag, _, n)
    for _ = 1, n do
      removed = removed + redis.call('LREM', list_key(tag), 1, arg())
    end
  end)
  return removed
end

-- ZADD of many pairs (flat: score, member, score, member...) with one flag ('GT', 'XX'...), in
-- chunks that stay within Lua's unpack limit: one command per chunk, not one per member.
local function zadd_pairs(zkey, flag, pairs)
  local step = 1000 -- even: a chunk never splits a pair
  for i = 1, #pairs, step do
    redis.call('ZADD', zkey, flag, unpack(pairs, i, math.min(i + step - 1, #pairs)))
  end
end
