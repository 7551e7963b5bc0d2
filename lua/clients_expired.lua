#!lua flags=allow-oom
-- clients_expired: janitor step of client expiry: claims the clients silent longer than the
-- live ttl of HEARD time (moved from clients to expiring: their pings answer NEED_REMOUNT and
-- their mounts wait from now on), and lists the segments to unmount: those whose client is not
-- live (claimed now or earlier, or unknown). A client's silence counts only from the start of
-- the service's current run of hearing ticks (heartbeat.lua): after a Redis outage or restart,
-- or while no worker ticks, nobody is expired for a silence the service could not hear.
-- allow-oom: expiry must keep working when Redis is full.
-- KEYS: [1] <global tag>:segments (HASH segment id -> client id), [2] <global tag>:clients (ZSET),
--       [3] <global tag>:heartbeat (HASH), [4] <global tag>:expiring (ZSET client -> claim ms).
-- ARGV: client live ttl ms, gap ms, limit.
-- Returns: {now ms, {segment id, client id, ...}, {client id claimed now, ...}, hearing 0/1}.
-- Errors: none.
--!include heartbeat.lua

local now = now_ms()
local ttl, gap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local hearing, since = hb_hearing(KEYS[3], gap, now)
local cutoff = now - ttl
local claimed = {}
if hearing and since < cutoff then
  claimed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', cutoff),
    'LIMIT', 0, limit)
  for _, c in ipairs(claimed) do
    redis.call('ZREM', KEYS[2], c)
    redis.call('ZADD', KEYS[4], now, c)
  end
end
local segs = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if #segs >= 2 * limit then
    break
  end
  if not redis.call('ZSCORE', KEYS[2], all[i + 1]) then
    table.insert(segs, all[i])
    table.insert(segs, all[i + 1])
  end
end
return { now, segs, claimed, hearing and 1 or 0 }
