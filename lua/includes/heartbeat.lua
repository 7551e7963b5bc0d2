-- When the service last heard anything, and since when it has heard continuously (global tag).
-- Needs keys.lua, errors.lua, common.lua.
--
-- {<ns>:g}:heartbeat HASH: heard (ms of the last hearing tick: a ping, a mount, a worker's or
-- the library janitor's tick), since (ms at which the current run of ticks began, no two of
-- them further apart than the gap). A client's silence only counts from `since`: a Redis
-- outage or a restart from AOF (no tick can be written meanwhile) starts a new run, so every
-- client's clock restarts with it, and a client is never expired for a silence the service
-- could not hear.
--!include common.lua

-- A hearing tick at now; returns since.
local function hb_hear(hkey, gap, now)
  local f = redis.call('HMGET', hkey, F.heartbeat.heard, F.heartbeat.since)
  local heard, since = tonumber(f[1]), tonumber(f[2])
  if not heard or not since or now - heard > gap or now < heard then
    since = now
  end
  redis.call('HSET', hkey, F.heartbeat.heard, now, F.heartbeat.since, since)
  return since
end

-- The service hears now (a tick within the gap): returns true and since; else false.
local function hb_hearing(hkey, gap, now)
  local f = redis.call('HMGET', hkey, F.heartbeat.heard, F.heartbeat.since)
  local heard, since = tonumber(f[1]), tonumber(f[2])
  if not heard or not since or now - heard > gap then
    return false, now
  end
  return true, since
end
