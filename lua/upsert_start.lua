#!lua flags=allow-cross-slot-keys
-- upsert_start: UpsertStart's object step (Mooncake MasterService::UpsertStart), per key:
--   absent                    -> 'absent', nothing written (the caller puts it: Case A);
--   exists COMPLETE, same size-> in place (Case B): same buffers, every replica and the object
--                                back to PROCESSING, client and put start time the caller's,
--                                out of the lru index (unreadable until UpsertEnd); hard pin
--                                kept as it is, soft pin kept or refreshed when asked;
--   exists COMPLETE, new size,
--   or a put/upsert in progress (preempted at once, unlike PutStart): with no reserved buffers
--                             -> 'alloc', nothing written (the caller reserves, calls again);
--                                with them -> 'new' (Case C): the old buffers go to the
--                                discarded set due at now + release timeout (a reader or the
--                                preempted writer may still touch them), the new ones are
--                                written PROCESSING under the caller's put id; hard pin = old or
--                                new, soft pin kept or refreshed. The object record stays, so a
--                                radix registration (its node, its parent) is kept as it was.
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: num_shards, commit deadline ms, release timeout ms, soft pin ttl ms; then group
--       count, then per group: anchor, shard index, n, then n items of key, put id, client id,
--       size (bytes, decimal string), soft pin (0/1), hard pin (0/1), reserved replicas (cjson
--       array as put_start's, or '' when none were reserved).
-- Returns: per item {code, message, mode, replicas cjson (store_json; '' unless mode is 'inplace', 'new' or
--          'again')}; mode 'absent', 'alloc', 'inplace', 'new', or 'again' (this put id already
--          started this upsert: a resent call whose reply was lost; the replicas as written).
--   A reservation passed in and not used (modes 'absent', 'inplace', 'again', or an error) is
--   the caller's to free.
-- Errors (per item): INTERNAL_ERROR (-1, reserved buffers older than the commit deadline),
--   SEGMENT_NOT_FOUND (-101, a reserved buffer's segment was unmounted meanwhile).
-- Idempotent: yes (a resent call answers 'again'; 'absent'/'alloc' write nothing).
--!include store.lua

local num_shards, deadline, release, soft_ttl = argn(), argn(), argn(), argn()
local now = now_ms()
local out = {}

-- Replica ids as put_start makes them: seq * num_shards + shard, exact past 2^53.
local function new_id(tag, shard)
  local seq = redis.call('INCR', K.seq(tag))
  if seq < 2 ^ 53 / 32768 then
    return string.format('%d', seq * num_shards + shard)
  end
  return u64_to_dec(u64_muladd(u64_from_dec(redis.call('GET', K.seq(tag))), num_shards, shard))
end

-- A pin field written on a registered object (rad present) sets rad to '2': a hot read of a
-- block key (store_grant_read) reads the pins only then.
local function set_pin(okey, rad, field, value)
  if rad then
    redis.call('HSET', okey, field, value, F.obj.radix, '2')
  else
    redis.call('HSET', okey, field, value)
  end
end

local function soft_pin(okey, old, soft, rad)
  if soft == 1 then
    set_pin(okey, rad, F.obj.soft_pin_ms, string.format('%d', math.max(tonumber(old) or 0, now + soft_ttl)))
  end
end

each_group(function(tag, shard, n)
  redis.call('ZREMRANGEBYSCORE', K.veto(tag), '-inf', now - deadline - 1000)
  for _ = 1, n do
    local key, pid, client, size, soft, hard = arg(), arg(), arg(), arg(), argn(), argn()
    local raw = arg()
    local okey = K.obj(tag, key)
    local f = redis.call('HMGET', okey, F.obj.put_id, F.obj.replicas, F.obj.status, F.obj.size,
      F.obj.soft_pin_ms, F.obj.upsert_id, F.obj.radix)
    local code, msg, mode, reps_out = E.OK, '', '', ''
    local old = store_replicas(f[2])
    if not f[1] then
      mode = 'absent'
    elseif f[3] == 'P' and (f[1] == pid or f[6] == pid) then
      mode, reps_out = 'again', f[2]
    elseif store_all_complete(old) and f[4] == size then
      for _, rep in ipairs(old) do
        rep.st = 'P'
      end
      reps_out = store_encode(old)
      redis.call('HSET', okey, F.obj.client, store_client_ref(tag, client), F.obj.created_ms, now, F.obj.status, 'P',
        F.obj.upsert_id, pid, F.obj.replicas, reps_out)
      soft_pin(okey, f[5], soft, f[7])
      redis.call('ZREM', K.lru(tag), key)
      redis.call('ZADD', K.processing(tag), now, key)
      mode = 'inplace'
    elseif raw == '' then
      mode = 'alloc'
    else
      local reps = cjson.decode(raw)
      for _, rep in ipairs(reps) do
        if code == E.OK and tonumber(rep.ms) < now - deadline then
          code, msg = E.INTERNAL_ERROR, 'key ' .. key .. ': allocation older than the commit deadline'
        end
        if code == E.OK and redis.call('ZSCORE', K.veto(tag), store_free_entry(rep.seg, rep.off, pid)) then
          code, msg = E.SEGMENT_NOT_FOUND, 'key ' .. key .. ': segment ' .. rep.seg .. ' was unmounted'
        end
      end
      if code == E.OK then
        for _, rep in ipairs(old) do
          redis.call('ZADD', K.discarded(tag), now + release, store_free_entry(rep.seg, rep.off, f[1]))
        end
        if not store_all_complete(old) then
          redis.call('HINCRBY', K.stats(tag), 'upsert_preempt_cnt', 1)
        end
        for _, rep in ipairs(reps) do
          rep.id, rep.st, rep.ms = new_id(tag, shard), 'P', nil
        end
        reps_out = store_encode(reps)
        redis.call('HSET', okey, F.obj.client, store_client_ref(tag, client), F.obj.created_ms, now, F.obj.size, size,
          F.obj.lease_ms, 0, F.obj.status, 'P', F.obj.put_id, pid, F.obj.replicas, reps_out)
        redis.call('HDEL', okey, F.obj.upsert_id)
        soft_pin(okey, f[5], soft, f[7])
        if hard == 1 then
          set_pin(okey, f[7], F.obj.hard_pin, '1')
        end
        redis.call('ZREM', K.lru(tag), key)
        redis.call('ZADD', K.processing(tag), now, key)
        dec_hincr(K.stats(tag), 'bytes', f[4] or '0', true)
        dec_hincr(K.stats(tag), 'bytes', size, false)
        mode = 'new'
      end
    end
    table.insert(out, { code, msg, mode, reps_out ~= '' and store_json(store_replicas(reps_out)) or '' })
  end
end)
return out
