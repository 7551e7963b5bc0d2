#!lua flags=allow-oom
-- clients_remove: last step of client expiry: forgets the clients being expired that no
-- segment names any more (their unmounts are done), so they may mount again.
-- KEYS: [1] <global tag>:expiring (ZSET client id -> claim ms), [2] <global tag>:segments (HASH
--       segment id -> client id).
-- ARGV: limit.
-- Returns: clients forgotten.
-- Errors: none.
-- Idempotent: yes.
--!include common.lua

local owners = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 2, #all, 2 do
  owners[all[i]] = true
end
local removed = 0
for _, c in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  if not owners[c] then
    removed = removed + redis.call('ZREM', KEYS[1], c)
  end
end
return removed
