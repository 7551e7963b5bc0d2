-- The namespace's recorded settings (global tag). Needs keys.lua, errors.lua, common.lua.
--
-- {<ns>:g}:meta HASH: schema_version, num_shards, radix ('1'/'0'), created_ms. Recorded on
-- first use; recorded again by any process that finds it gone (Redis restarted empty), so that
-- a process with other settings is refused instead of writing a second layout.
--!include common.lua

-- Records (schema, shards, radix) if nothing is recorded; returns the recorded
-- {schema_version, num_shards, radix, created_ms}.
local function meta_record(mkey, schema, shards, radix)
  if redis.call('HSETNX', mkey, F.meta.schema_version, schema) == 1 then
    redis.call('HSET', mkey, F.meta.num_shards, shards, F.meta.radix, radix, F.meta.created_ms, now_ms())
  end
  return redis.call('HMGET', mkey, F.meta.schema_version, F.meta.num_shards, F.meta.radix, F.meta.created_ms)
end
