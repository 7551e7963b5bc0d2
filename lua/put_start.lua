#!lua flags=allow-cross-slot-keys
-- put_start: step 2 of PutStart (commit): writes the objects whose buffers alloc_reserve got.
-- Per item: refuses an existing object (OBJECT_ALREADY_EXISTS) unless it is a stale put (no
-- COMPLETE replica, put start + discard timeout passed), which is taken over: its buffers go to
-- the discarded set, released at its put start + release timeout. Refuses allocations older
-- than the commit deadline (the janitor may reclaim them after its grace) and allocations vetoed
-- by an unmount. With the radix flag, registers the key under its prefix node (RFC Path A).
-- KEYS: the shard anchors (<shard tag>:stats, HASH); only the first one on a cluster.
-- ARGV: head: num_shards, commit deadline ms, discard timeout ms, release timeout ms, soft pin
--       ttl ms, radix flag (0/1); then group count, then per group: anchor, shard index, n, then n items of
--       key, put id, client id, size (bytes, decimal string), soft pin (0/1), hard pin (0/1),
--       replicas (cjson array of {seg, off, len, base (u64 hex strings), ep, proto, name, ms}),
--       prefix hash, parent hash ('' none), parent shard (-1 none), link generation (0 none),
--       cycle checked (0/1).
-- Returns: {{per item: {code, message, {replica id (decimal string)...}, edge adopted 0/1}},
--          {continuation...}}. Idempotent: an object already written by this put id (a resent
--          call whose first reply was lost) answers OK with its replica ids.
--   A failed item whose node already names the parent adopts the bumped edge (no undo).
-- Errors (per item): OBJECT_ALREADY_EXISTS (-705), INVALID_PARAMS (-600, radix parent conflict),
--   SEGMENT_NOT_FOUND (-101, segment unmounted meanwhile), INTERNAL_ERROR (-1, allocation older
--   than the commit deadline); 1 (not a Mooncake code; nothing written) when the node exists
--   without a parent and has children and the cycle check was not done (see radix_register).
-- Idempotent: yes (an object already written by this put id answers OK).
--!include store.lua

local num_shards, deadline, discard, release, soft_ttl, radix_on =
  argn(), argn(), argn(), argn(), argn(), argn()
local now = now_ms()
local out, conts, frees = {}, {}, {}
each_group(function(tag, shard, n)
  redis.call('ZREMRANGEBYSCORE', K.veto(tag), '-inf', now - deadline - 1000)
  for _ = 1, n do
    local key, pid, client, size, soft, hard = arg(), arg(), arg(), arg(), argn(), argn()
    local reps = cjson.decode(arg())
    local prefix, parent, pshard, gen, checked = arg(), arg(), arg(), arg(), argn()
    local code, msg = E.OK, ''
    for _, rep in ipairs(reps) do
      if code == E.OK and tonumber(rep.ms) < now - deadline then
        code, msg = E.INTERNAL_ERROR, 'key ' .. key .. ': allocation older than the commit deadline'
      end
      if code == E.OK and redis.call('ZSCORE', K.veto(tag), store_free_entry(rep, pid)) then
        code, msg = E.SEGMENT_NOT_FOUND, 'key ' .. key .. ': segment ' .. rep.seg .. ' was unmounted'
      end
    end
    local okey = K.obj(tag, key)
    local takeover = nil
    local f = redis.call('HMGET', okey, F.obj.created_ms, F.obj.replicas, F.obj.put_id)
    if f[3] == pid then
      code = 'again'
    end
    if code == E.OK then
      if f[3] then
        local t = tonumber(f[1])
        if store_any_complete(store_replicas(f[2])) or t + discard > now then
          code, msg = E.OBJECT_ALREADY_EXISTS, 'key ' .. key .. ': object already exists'
        else
          takeover = t
        end
      end
    end
    if code == E.OK and radix_on == 1 and parent ~= '' then
      local cur = redis.call('HGET', K.node(tag, prefix), F.node.parent)
      if cur and cur ~= '' and cur ~= parent then
        code, msg = E.INVALID_PARAMS,
          'parent_block_hash: node ' .. prefix .. ' already has parent ' .. cur
      elseif checked ~= 1 and radix_needs_cycle_check(tag, prefix, parent) then
        code, msg = RADIX_CHECK_CYCLE, 'parent cycle check needed'
      end
    end
    local ids = {}
    if code == E.OK then
      if takeover then
        store_erase(tag, shard, key, conts, frees, takeover + release)
        redis.call('HINCRBY', K.stats(tag), 'put_start_discard_cnt', 1)
      end
      for j, rep in ipairs(reps) do
        -- id = seq * num_shards + shard, exact: past 2^53 the counter is read back as a string.
        local seq = redis.call('INCR', K.seq(tag))
        local id
        if seq < 2 ^ 53 / 32768 then
          id = string.format('%d', seq * num_shards + shard)
        else
          id = u64_to_dec(u64_muladd(u64_from_dec(redis.call('GET', K.seq(tag))), num_shards, shard))
        end
        rep.id, rep.st, rep.ms = id, 'P', nil
        ids[j] = id
      end
      redis.call('HSET', okey, F.obj.client, client, F.obj.created_ms, now, F.obj.size, size, F.obj.lease_ms, 0, F.obj.status, 'P', F.obj.put_id, pid,
        F.obj.prefix, prefix, F.obj.replicas, store_encode(reps))
      if soft == 1 then
        redis.call('HSET', okey, F.obj.soft_pin_ms, now + soft_ttl)
      end
      if hard == 1 then
        redis.call('HSET', okey, F.obj.hard_pin, '1')
      end
      redis.call('ZADD', K.processing(tag), now, key)
      redis.call('HINCRBY', K.stats(tag), F.stats.objects, 1)
      dec_hincr(K.stats(tag), 'bytes', size, false)
      if radix_on == 1 then
        -- A block whose children were marked as orphans is stored again: they are adopted.
        local adopt = radix_will_adopt(tag, prefix)
        radix_attach(tag, prefix, parent, pshard, gen, { key }, now, 1)
        redis.call('HSET', okey, F.obj.radix, '1')
        if adopt then
          radix_mark_children(tag, shard, prefix, 'adopt', conts, now)
        end
      end
    end
    local adopted = 0
    if code == 'again' then
      code = E.OK
      for j, rep in ipairs(store_replicas(f[2])) do
        ids[j] = rep.id
      end
    elseif code ~= E.OK and radix_on == 1 then
      adopted = store_adopt_edge(tag, prefix, parent, gen)
    end
    table.insert(out, { code, msg, ids, adopted })
  end
end)
return { out, conts }
