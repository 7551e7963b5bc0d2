#!lua flags=no-writes,allow-cross-slot-keys
-- objects_complete: every COMPLETE object of the given shards with its put id, read in one atomic
-- step per node (a consistent snapshot on a single Redis, even while an evictor runs), without
-- granting a lease or touching recency. For replay health samples and tools. The layout keeps no
-- SET of a shard's objects: one SCAN walk of the node (MATCH <ARGV[1]>) finds them all, sorted
-- into the requested shards by tag.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: the SCAN MATCH pattern of object hashes (KeySchema.scan_pattern('obj'): :o: and block
--       hashes); group count, then
--       per group: anchor, shard index, 0.
-- Returns: per group, in ARGV order, a flat list: key, put id, key, put id, ...
-- Errors: none.
--!include common.lua

local pattern = arg()
local wanted, order = {}, {}
each_group(function(tag, _, _)
  wanted[tag] = {}
  table.insert(order, tag)
end)
local seen = {}
local cursor = '0'
repeat
  local reply = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
  cursor = reply[1]
  for _, okey in ipairs(reply[2]) do
    local close = string.find(okey, '}', 1, true)
    local tag = close and string.sub(okey, 1, close) or ''
    local keys = wanted[tag]
    -- The object's key name: K.obj(tag, key) is <tag>:o:<key>, or the block hash
    -- <tag>:n:<key> of a block key (which may hold only a node: no status field then).
    local key = keys and not seen[okey] and string.sub(okey, #tag + 4)
    if key and K.obj(tag, key) == okey then
      seen[okey] = true
      local f = redis.call('HMGET', okey, F.obj.status, F.obj.put_id)
      if f[1] == 'C' then
        table.insert(keys, key)
        table.insert(keys, f[2] or '')
      end
    end
  end
until cursor == '0'
local out = {}
for i, tag in ipairs(order) do
  out[i] = wanted[tag]
end
return out
