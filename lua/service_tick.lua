#!lua flags=allow-oom
-- service_tick: a worker's (or the library janitor's) periodic tick: records that the service
-- hears (see heartbeat.lua), records the namespace meta again if it is gone (Redis restarted
-- empty), returning what is recorded so that a process whose settings differ stops serving,
-- and takes the janitor's turn (at most one janitor run per interval across all workers).
-- allow-oom: ticks and the janitor must go on while Redis is full, or every client's clock
-- would restart and nothing would be reclaimed.
-- KEYS: [1] <global tag>:meta (HASH), [2] <global tag>:heartbeat (HASH heard, since),
--       [3] <global tag>:janitor (STRING, the janitor's turn).
-- ARGV: schema version, shard count, radix ('1'/'0'), hearing (1: this process serves clients;
--       0: a standalone evictor, which hears no client), gap ms, janitor interval ms (0: no
--       turn wanted), turn token.
-- Returns: {schema version, shard count, radix, created ms, now ms, since ms, turn 1/0}.
-- Errors: none.
-- Idempotent: yes.
--!include meta.lua
--!include heartbeat.lua

local now = now_ms()
local m = meta_record(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
local since
if ARGV[4] == '1' then
  since = hb_hear(KEYS[2], tonumber(ARGV[5]), now)
else
  local _, s = hb_hearing(KEYS[2], tonumber(ARGV[5]), now)
  since = s
end
local turn = 0
if tonumber(ARGV[6]) > 0 and redis.call('SET', KEYS[3], ARGV[7], 'NX', 'PX', ARGV[6]) then
  turn = 1
end
return { m[1], m[2], m[3], m[4], now, since, turn }
