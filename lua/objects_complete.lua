#!lua flags=no-writes,allow-cross-slot-keys
-- objects_complete: every COMPLETE object of the given shards (with its put id, or its key
-- only), read in one atomic step per node (a consistent snapshot on a single Redis, even while
-- an evictor runs), without granting a lease or touching recency. For replay health samples
-- and tools (the admin key list). The layout keeps no SET of a shard's objects: one SCAN walk
-- of the node (MATCH <ARGV[1]>) finds them all, sorted into the requested shards by tag.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: the SCAN MATCH pattern of object hashes (KeySchema.scan_pattern('obj'): :o: and block
--       hashes); with put ids (1: key, put id pairs; 0: keys only); group count, then
--       per group: anchor, shard index, 0.
-- Returns: per group, in ARGV order, a flat list: key, put id, key, put id, ... (with put ids),
--          or key, key, ... (keys only). SCAN may return a key twice (the keyspace can rehash
--          during the walk): callers merge into a set or map.
-- Cost: per key of the node the pattern matches, one HGET (keys only) or HMGET (put ids) of
--   an object hash and no name built; the caller decodes one string per key (keys only).
-- Errors: none.
--!include common.lua

local pattern, with_ids = arg(), argn() == 1
local wanted, order = {}, {}
each_group(function(tag, _, _)
  wanted[tag] = {}
  table.insert(order, tag)
end)
local sfind, ssub, obj_id = string.find, string.sub, K.obj_id
local status, put_id, complete = F.obj.status, F.obj.put_id, 'C'
local cursor = '0'
repeat
  local reply = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
  cursor = reply[1]
  local found = reply[2]
  for j = 1, #found do
    local okey = found[j]
    local close = sfind(okey, '}', 1, true)
    local tag = close and ssub(okey, 1, close)
    local keys = tag and wanted[tag]
    local key = keys and obj_id(okey, close)
    if key then
      local n = #keys
      if with_ids then
        local f = redis.call('HMGET', okey, status, put_id)
        if f[1] == complete then
          keys[n + 1], keys[n + 2] = key, f[2] or ''
        end
      elseif redis.call('HGET', okey, status) == complete then
        keys[n + 1] = key
      end
    end
  end
until cursor == '0'
local out = {}
for i, tag in ipairs(order) do
  out[i] = wanted[tag]
end
return out
