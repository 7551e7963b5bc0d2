#!lua flags=allow-oom
-- evictor_lease: the evictor lease (one evictor and janitor among all workers) with a fencing
-- epoch. A holder renews before expiry; anyone may take over once the lease expired (Redis time),
-- which raises the epoch to max(recorded + 1, Redis time ms). The epoch never goes down (release
-- keeps it; an empty restart resumes above it), so shard fences stay valid.
-- KEYS: [1] <global tag>:evictor (HASH holder, epoch, expires_ms), [2] <global tag>:evict_needed
--       (STRING, the durable "an allocation failed" flag; same tag).
-- ARGV: op, holder id, ttl ms, epoch (release/clear), flag value (clear).
--   op 'acquire': take or renew the lease; 'release': give it up (holder and epoch must match);
--   'read': state only; 'clear': delete the flag if it still has the value read earlier and the
--   caller holds the lease with that epoch.
-- Returns: {granted 0/1, epoch, expires ms, holder, now ms, flag value or ''}.
-- Errors: none.
-- Idempotent: yes (a granted lease whose reply was lost is renewed by the resend).
--!include common.lua

local op, me, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], F.evictor.holder, F.evictor.epoch, F.evictor.expires_ms)
local holder, epoch, expires = f[1] or '', tonumber(f[2]) or 0, tonumber(f[3]) or 0
local live = holder ~= '' and expires > now
local granted = 0
if op == 'acquire' then
  if live and holder == me then
    expires = now + ttl
    granted = 1
  elseif not live then
    -- Monotonic even across a Redis that restarted empty (the record and every shard fence
    -- gone): Redis time in ms exceeds any epoch taken before, so a paused former evictor
    -- cannot write with its old epoch above a fence restarted from zero.
    epoch = math.max(epoch + 1, now)
    holder, expires = me, now + ttl
    granted = 1
  end
  if granted == 1 then
    redis.call('HSET', KEYS[1], F.evictor.holder, holder, F.evictor.epoch, epoch, F.evictor.expires_ms, expires,
      F.evictor.acquired_ms, now)
  end
elseif op == 'release' then
  if holder == me and epoch == tonumber(ARGV[4]) then
    redis.call('HSET', KEYS[1], F.evictor.holder, '', F.evictor.expires_ms, 0)
    holder, expires, granted = '', 0, 1
  end
elseif op == 'clear' then
  if live and holder == me and epoch == tonumber(ARGV[4]) then
    local v = redis.call('GET', KEYS[2])
    if v and v == ARGV[5] then
      redis.call('DEL', KEYS[2])
      granted = 1
    end
  end
end
local flag = redis.call('GET', KEYS[2]) or ''
return { granted, epoch, expires, holder, now, flag }
