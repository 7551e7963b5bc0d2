#!lua flags=allow-cross-slot-keys,allow-oom
-- put_revoke: PutRevoke: drops a put's PROCESSING replicas; the object (and its radix
-- registration) goes, its buffers go to the outbox.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: group count, then per group: anchor, shard index, n, then n pairs (key, client id).
-- Returns: {{per item {code, message}}, {continuation...}, {{shard, outbox entry}...}}.
-- Errors (per item): OBJECT_NOT_FOUND (-704), ILLEGAL_CLIENT (-601), INVALID_WRITE (-700) when a
--   replica is not PROCESSING.
--!include store.lua

local out, conts, frees = {}, {}, {}
each_group(function(tag, shard, n)
  for _ = 1, n do
    local key, client = arg(), arg()
    local f = redis.call('HMGET', K.obj(tag, key), F.obj.client, F.obj.replicas)
    if not f[1] then
      table.insert(out, { E.OBJECT_NOT_FOUND, 'key ' .. key .. ': object not found' })
    elseif f[1] ~= store_client_known(tag, client) then
      table.insert(out, { E.ILLEGAL_CLIENT, 'client_id: key ' .. key .. ' was started by another client' })
    else
      local ok = true
      for _, rep in ipairs(store_replicas(f[2])) do
        if rep.st ~= 'P' then
          ok = false
        end
      end
      if not ok then
        table.insert(out, { E.INVALID_WRITE, 'key ' .. key .. ': a replica is not PROCESSING' })
      else
        store_erase(tag, shard, key, conts, frees, nil)
        table.insert(out, { E.OK, '' })
      end
    end
  end
end)
return { out, conts, frees }
