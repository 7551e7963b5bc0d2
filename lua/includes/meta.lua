-- The namespace's recorded settings (global tag). Needs keys.lua, errors.lua, common.lua.
--
-- {<ns>:g}:meta HASH: schema_version, num_shards, radix ('1'/'0'), created_ms. Recorded on
-- first use; recorded again by any process that finds it gone (Redis restarted empty), so that
-- a process with other settings is refused instead of writing a second layout.

-- Records (schema, shards, radix) if nothing is recorded; returns the recorded
-- {schema_version, num_shards, radix, created_ms}.
local function meta_record(mkey, schema, shards, radix)
  if redis.call('HSETNX', mkey, 'schema_version', schema) == 1 then
    redis.call('HSET', mkey, 'num_shards', shards, 'radix', radix, 'created_ms', now_ms())
  end
  return redis.call('HMGET', mkey, 'schema_version', 'num_shards', 'radix', 'created_ms')
end
