#!lua
-- te_metadata_put: PUT /metadata?key=K as Mooncake's HTTP metadata server does it: a key naming
-- "rpc_meta" is written once (the same value again is a no-op; another value is refused, so two
-- transfer engines never claim one RPC endpoint), any other key is overwritten.
-- KEYS: [1] <global tag>:te_metadata (HASH metadata key -> value).
-- ARGV: metadata key, value.
-- Returns: 'updated', 'unchanged' or 'duplicate'.
-- Errors: none.
--!include common.lua

local key, value = ARGV[1], ARGV[2]
if string.find(key, 'rpc_meta', 1, true) then
  local cur = redis.call('HGET', KEYS[1], key)
  if cur then
    if cur == value then
      return 'unchanged'
    end
    return 'duplicate'
  end
end
redis.call('HSET', KEYS[1], key, value)
return 'updated'
