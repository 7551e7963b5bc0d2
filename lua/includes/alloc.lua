-- Segment allocator inside ONE segment tag (stag). Needs keys.lua, errors.lua, common.lua,
-- u64.lua.
--
-- Every offset and length is a u64 (16 hex characters, see u64.lua) wherever it is stored or
-- passed: no ZSET score (a double) ever holds one, and a Lua number only inside a script and
-- below 2^52 (exact: the held extent, bucket and rel, sums; u64 strings past that). Best fit over free extents kept in two lexicographically
-- ordered ZSETs (every score 0, ZRANGEBYLEX): free_off members are offset .. length (neighbours
-- by offset), free_len members are length .. offset (best fit: the smallest length >= size,
-- lowest offset among equals). O(log n) per call; a reserve script's allocations carve one
-- held extent in Lua and write once per segment and record bucket (alloc_begin / alloc_take /
-- alloc_end), so a batch in one large free extent costs no Redis call per allocation.
--
-- Allocation records (schema 4) live in buckets: the segment's info field ak (bucket_shift)
-- splits an offset into bucket = offset >> ak and rel = offset mod 2^ak (both hex without
-- leading zeros). HASH <stag>:a:<bucket>: field rel -> "len|put id|ms" (len hex without leading
-- zeros; ms, the allocation's Redis time, only while it is pending: empty once the janitor
-- confirmed it), field rel .. 'k' -> the owner key as records.alloc_owner encodes it ('>' + the
-- 32 bytes of a leading 64-hex block hash + the rest, or '<' + the key; written as Python sends
-- it, never decoded here). ak is picked when the segment holds no record, from the first size:
-- 2^ak / size in (32, 64], so a bucket of one size holds at most 64 records, 128 fields, every
-- value within 64 bytes: listpack-encoded (smaller sizes mixed in may push one bucket past
-- 128 fields: it becomes a hashtable, still correct). ZSET <stag>:ab: every bucket that holds
-- records -> a lower bound of its oldest pending ms (+inf when it holds none): the janitor reads
-- the due buckets, unmount and fsck walk all of them. info: allocated (u64, the sum of record
-- lengths), allocations and pending (record counts), read once per script and segment
-- (alloc_seg) and written once (alloc_flush).
--!include common.lua
--!include u64.lua

-- A u64 without its leading zeros ('0' for zero), and back.
local function u64_short(x)
  local s = string.gsub(x, '^0+', '')
  if s == '' then
    return '0'
  end
  return s
end

local function u64_pad(s)
  return string.rep('0', 16 - #s) .. s
end

-- a + b and a - b (nil when b > a) of u64 values, as u64_add / u64_sub, by numbers when both
-- are below 2^52 (exact): two tonumber and one format instead of four of each.
local function alloc_add(a, b)
  if a < U64_SMALL and b < U64_SMALL then
    return u64_of(tonumber(a, 16) + tonumber(b, 16))
  end
  return u64_add(a, b)
end

local function alloc_sub(a, b)
  if a < U64_SMALL and b < U64_SMALL then
    local d = tonumber(a, 16) - tonumber(b, 16)
    if d < 0 then
      return nil
    end
    return u64_of(d)
  end
  return u64_sub(a, b)
end

-- "len|pid|ms" -> len (u64), pid, ms (a number, nil once confirmed)
local function alloc_parse(rec)
  local a = string.find(rec, '|', 1, true)
  local b = string.find(rec, '|', a + 1, true)
  return u64_pad(string.sub(rec, 1, a - 1)), string.sub(rec, a + 1, b - 1),
    tonumber(string.sub(rec, b + 1))
end

-- offset (u64) -> bucket, rel (hex without leading zeros), for a shift ak in [6, 31]: exact on
-- 32-bit halves (bucket = bhi * 2^32 + blo, each below 2^32); an offset below 2^52 as one
-- number (the same strings).
local function alloc_bucket(off, ak)
  local p = 2 ^ ak
  local n = u64_small(off)
  if n then
    local bn = math.floor(n / p)
    return string.format('%x', bn), string.format('%x', n - bn * p)
  end
  local hi, lo = u64_split(off)
  local q = TWO32 / p
  local lhi = math.floor(lo / p)
  local bhi = math.floor(hi / p)
  local blo = (hi - bhi * p) * q + lhi
  local b
  if bhi > 0 then
    b = string.format('%x%08x', bhi, blo)
  else
    b = string.format('%x', blo)
  end
  return b, string.format('%x', lo - lhi * p)
end

-- bucket, rel -> offset (u64): the inverse of alloc_bucket.
local function alloc_offset(b, rel, ak)
  local n = #b
  local p = 2 ^ ak
  if n <= 13 then -- bucket below 2^52: bucket * 2^ak is exact, and so is a sum below 2^53
    local v = tonumber(b, 16) * p + tonumber(rel, 16)
    if v < 9007199254740992 then
      return u64_of(v)
    end
  end
  local bhi = 0
  if n > 8 then
    bhi = tonumber(string.sub(b, 1, n - 8), 16)
  end
  local blo = tonumber(string.sub(b, math.max(1, n - 7)), 16)
  local q = TWO32 / p
  local top = math.floor(blo / q)
  return u64_join(bhi * p + top, (blo - top * q) * p + tonumber(rel, 16))
end

-- The bucket shift for a segment whose first allocation has this size: 2^ak / size in
-- (32, 64], within [6, 31].
local function alloc_pick_shift(size)
  local hi, lo = u64_split(size)
  if hi > 0 then
    return 31
  end
  local e = 0
  while e < 32 and 2 ^ (e + 1) <= lo do
    e = e + 1
  end
  return math.max(6, math.min(31, e + 6))
end

-- This script's view of a segment's info counters (read once, written by alloc_flush).
local alloc_segs = {}
local function alloc_seg(stag)
  local s = alloc_segs[stag]
  if not s then
    local f = redis.call('HMGET', K.info(stag), F.info.allocated, F.info.allocations,
      F.info.pending, F.info.bucket_shift)
    s = { stag = stag, allocated = f[1] or U64_ZERO, n = tonumber(f[2] or '0'),
      np = tonumber(f[3] or '0'), ak = tonumber(f[4] or ''), dirty = false }
    alloc_segs[stag] = s
  end
  return s
end

-- A segment left empty (no record, no bucket) keeps no bucket shift: alloc_begin picks it again
-- from the next first size anyway, and a put refused after its reservation was undone leaves
-- the segment as it found it.
local function alloc_flush(seg)
  if seg.dirty then
    if seg.n == 0 and redis.call('EXISTS', K.alloc_index(seg.stag)) == 0 then
      seg.ak = nil
      redis.call('HSET', K.info(seg.stag), F.info.allocated, seg.allocated, F.info.allocations,
        seg.n, F.info.pending, seg.np)
      redis.call('HDEL', K.info(seg.stag), F.info.bucket_shift)
    else
      redis.call('HSET', K.info(seg.stag), F.info.allocated, seg.allocated, F.info.allocations,
        seg.n, F.info.pending, seg.np, F.info.bucket_shift, seg.ak or '')
    end
    seg.dirty = false
  end
end

-- A bucket's records from its HGETALL: list of {rel, len (u64), pid, ms or nil}, and the
-- oldest pending ms (nil when none is pending).
local function alloc_bucket_records(flat)
  local out, oldest = {}, nil
  for i = 1, #flat, 2 do
    local field = flat[i]
    if string.sub(field, -1) ~= 'k' then
      local len, pid, ms = alloc_parse(flat[i + 1])
      table.insert(out, { field, len, pid, ms, flat[i + 1] })
      if ms and (not oldest or ms < oldest) then
        oldest = ms
      end
    end
  end
  return out, oldest
end

-- Sets a bucket's index score to its oldest pending ms (+inf when none; drops a bucket gone).
local function alloc_index_set(stag, b, oldest)
  if redis.call('EXISTS', K.alloc(stag, b)) == 0 then
    redis.call('ZREM', K.alloc_index(stag), b)
  elseif oldest then
    redis.call('ZADD', K.alloc_index(stag), 'XX', string.format('%d', oldest), b)
  else
    redis.call('ZADD', K.alloc_index(stag), 'XX', '+inf', b)
  end
end

-- A record's pid and ms (a number, nil once confirmed), and where its two '|' are; the
-- readers that need no length take this instead of alloc_parse.
local function alloc_parse_pid(rec)
  local a = string.find(rec, '|', 1, true)
  local b = string.find(rec, '|', a + 1, true)
  return string.sub(rec, a + 1, b - 1), tonumber(string.sub(rec, b + 1)), a, b
end

-- The oldest pending ms of a bucket's HGETALL (nil when none is pending), as
-- alloc_bucket_records says, without building its records.
local function alloc_bucket_oldest(flat)
  local oldest = nil
  for i = 1, #flat, 2 do
    if string.byte(flat[i], -1) ~= 107 then -- not an owner field ('k')
      local rec = flat[i + 1]
      local b = string.find(rec, '|', string.find(rec, '|', 1, true) + 1, true)
      local ms = tonumber(string.sub(rec, b + 1))
      if ms and (not oldest or ms < oldest) then
        oldest = ms
      end
    end
  end
  return oldest
end

-- Recomputes a bucket's index score from its records.
local function alloc_index_refresh(stag, b)
  alloc_index_set(stag, b, alloc_bucket_oldest(redis.call('HGETALL', K.alloc(stag, b))))
end

local function alloc_add_free(stag, off, len)
  redis.call('ZADD', K.free_off(stag), 0, off .. len)
  redis.call('ZADD', K.free_len(stag), 0, len .. off)
end

local function alloc_del_free(stag, off, len)
  redis.call('ZREM', K.free_off(stag), off .. len)
  redis.call('ZREM', K.free_len(stag), len .. off)
end

-- The whole segment free: one extent [0, size).
local function alloc_init(stag, size)
  redis.call('DEL', K.free_off(stag), K.free_len(stag), K.alloc_index(stag))
  alloc_add_free(stag, U64_ZERO, size)
end

-- Inserts the free extent [off, off + len), merging it with free neighbours.
local function alloc_insert_free(stag, off, len)
  local fo = K.free_off(stag)
  -- Members below the bare offset are exactly the extents that start before it.
  local prev = redis.call('ZREVRANGEBYLEX', fo, '(' .. off, '-', 'LIMIT', 0, 1)[1]
  if prev then
    local poff, plen = string.sub(prev, 1, 16), string.sub(prev, 17, 32)
    if alloc_add(poff, plen) == off then
      alloc_del_free(stag, poff, plen)
      off, len = poff, alloc_add(plen, len)
    end
  end
  local stop = alloc_add(off, len)
  -- 'g' sorts after every hex digit: the first extent starting after off.
  local nxt = redis.call('ZRANGEBYLEX', fo, '(' .. off .. 'g', '+', 'LIMIT', 0, 1)[1]
  if nxt and string.sub(nxt, 1, 16) == stop then
    local nlen = string.sub(nxt, 17, 32)
    alloc_del_free(stag, stop, nlen)
    len = alloc_add(len, nlen)
  end
  alloc_add_free(stag, off, len)
end

-- Caches of alloc_take, by value, for every segment of the script (upvalues: cheaper than table
-- fields): rel number -> its hex (without leading zeros) and that .. 'k' (a batch spread over
-- buckets repeats the rels of one size); the last size (u64) -> its number (below 2^52, else
-- nil) and its short hex .. '|'; the last now -> '|' .. its decimal; the last offset's high
-- half -> its 8 hex digits; the last shift -> 2^shift; and the last bucket written: its state,
-- number, field list and that list's length.
local alloc_rels, alloc_relks = {}, {}
local alloc_sz, alloc_szn, alloc_szs = nil, nil, nil
local alloc_nowv, alloc_nows = nil, nil
local alloc_offhi, alloc_offhs = nil, nil
local alloc_ak, alloc_p = nil, nil
local alloc_cst, alloc_cb, alloc_cf, alloc_cn = nil, nil, nil, 0

-- A script's allocations in segment stag (alloc_begin, alloc_take..., alloc_end): best fit as
-- if each were written at once, but the extent being carved is held in Lua (out of the free
-- ZSETs) and the records, bucket index entries and counters are written once in alloc_end (one
-- HSET per bucket touched). A batch of puts in a fresh (or one large free) extent costs no Redis
-- call per allocation: the held extent is compared with the best ZSET extent, and a ZSET lookup
-- that found nothing for a size is not repeated for that size or larger (nothing is added to the
-- ZSETs meanwhile, except a held extent put back, which forgets it). Only this script sees the
-- held state: frees, the janitor and unmounts see the segment after alloc_end.
--
-- The held extent is st.ho, st.hl (offset, length) and st.hk its kind: nil none, true numbers
-- (offset and length below 2^52, so every sum of them is exact: the common case), false u64
-- strings (an extent anywhere in u64). The sum of the sizes taken is st.total (u64) + st.tn (a
-- number below 2^52). With the caches above, a batch of one size formats one offset and one
-- rel per allocation and builds no table but one per bucket.
local function alloc_begin(stag)
  local seg = alloc_seg(stag)
  -- An empty segment picks its bucket shift again, from the next first size.
  if seg.n == 0 and redis.call('EXISTS', K.alloc_index(stag)) == 0 then
    seg.ak = nil
  end
  return { stag = stag, seg = seg, hk = nil, ho = nil, hl = nil, buckets = {}, order = {},
    total = U64_ZERO, tn = 0, count = 0, none = nil, now = nil }
end

-- The held extent as u64 strings (offset, length), or nil when none is held.
local function alloc_held(st)
  if st.hk then
    return u64_of(st.ho), u64_of(st.hl)
  elseif st.hk == false then
    return st.ho, st.hl
  end
  return nil, nil
end

-- Holds the free extent (off, len) (u64 strings), as numbers when both are below 2^52.
local function alloc_hold(st, off, len)
  if off < U64_SMALL and len < U64_SMALL then
    st.hk, st.ho, st.hl = true, tonumber(off, 16), tonumber(len, 16)
  else
    st.hk, st.ho, st.hl = false, off, len
  end
end

-- Best-fit allocation of size bytes (u64), owned by owner (encoded, records.alloc_owner) and
-- put id pid. Returns the offset (u64), or nil when no extent is large enough.
local function alloc_take(st, size, owner, pid, now)
  if size ~= alloc_sz then
    alloc_sz, alloc_szn, alloc_szs = size, u64_small(size), u64_short(size) .. '|'
  end
  local szn = alloc_szn
  local hk, hl = st.hk, st.hl
  local fits
  if hk then
    fits = szn ~= nil and hl >= szn -- a size past 2^52 is larger than a numeric extent
  elseif hk == false then
    fits = hl >= size
  else
    fits = false
  end
  local none = st.none
  if not (none and size >= none) then
    local stag = st.stag
    local c = redis.call('ZRANGEBYLEX', K.free_len(stag), '[' .. size, '+', 'LIMIT', 0, 1)[1]
    if c then
      local clen, coff = string.sub(c, 1, 16), string.sub(c, 17, 32)
      local keep = false
      if fits then
        -- Smallest length first, lowest offset among equals (the ZSET's lexicographic order).
        local hoff, hlen = alloc_held(st)
        keep = hlen < clen or (hlen == clen and hoff < coff)
      end
      if not keep then
        alloc_del_free(stag, coff, clen)
        if hk ~= nil then
          local hoff, hlen = alloc_held(st)
          alloc_add_free(stag, hoff, hlen)
          st.none = nil
        end
        alloc_hold(st, coff, clen)
        hk, hl = st.hk, st.hl
      end
    else
      st.none = size
      if not fits then
        return nil
      end
    end
  elseif not fits then
    return nil
  end
  local seg = st.seg
  local ak = seg.ak
  if not ak then
    ak = alloc_pick_shift(size)
    seg.ak = ak
  end
  if ak ~= alloc_ak then
    alloc_ak, alloc_p, alloc_cst = ak, 2 ^ ak, nil
  end
  local off, b, rel, relk
  local fields, k
  if hk then
    -- The held extent fits and is numeric, so size is below 2^52 too (szn is a number).
    local o = st.ho
    if hl > szn then
      st.ho, st.hl = o + szn, hl - szn
    else
      st.hk, st.ho, st.hl = nil, nil, nil
    end
    -- The offset: its high 8 hex digits once per 4 GiB, the low ones by hex8.
    local lo = o % TWO32
    local hi = (o - lo) / TWO32
    if hi ~= alloc_offhi then
      alloc_offhi, alloc_offhs = hi, hex8(hi)
    end
    off = alloc_offhs .. hex8(lo)
    local p = alloc_p
    local rn = o % p
    local bn = (o - rn) / p
    rel = alloc_rels[rn]
    if rel then
      relk = alloc_relks[rn]
    else
      rel = hex_short(rn)
      relk = rel .. 'k'
      alloc_rels[rn], alloc_relks[rn] = rel, relk
    end
    if bn == alloc_cb and st == alloc_cst then
      fields, k = alloc_cf, alloc_cn
    else
      b = string.format('%x', bn)
      alloc_cb = bn
    end
    local tn = st.tn + szn
    if tn >= 4503599627370496 then -- 2^52: into the u64 total
      st.total, tn = u64_add(st.total, u64_of(tn)), 0
    end
    st.tn = tn
  else
    off = st.ho
    if hl > size then
      st.ho, st.hl = u64_add(off, size), u64_sub(hl, size)
    else
      st.hk, st.ho, st.hl = nil, nil, nil
    end
    b, rel = alloc_bucket(off, ak)
    relk = rel .. 'k'
    st.total = u64_add(st.total, size)
    alloc_cb = nil
  end
  if not fields then
    fields = st.buckets[b]
    if not fields then
      fields = {}
      st.buckets[b] = fields
      st.order[#st.order + 1] = b
    end
    k = #fields
    alloc_cst, alloc_cf = st, fields
  end
  if now ~= alloc_nowv then
    alloc_nowv, alloc_nows = now, '|' .. string.format('%d', now)
  end
  fields[k + 1] = rel
  fields[k + 2] = alloc_szs .. pid .. alloc_nows
  fields[k + 3] = relk
  fields[k + 4] = owner
  alloc_cn = k + 4
  st.count = st.count + 1
  if st.now ~= now then
    st.now = now
  end
  return off
end

-- Writes a script's allocations in st's segment: the held extent's rest back to the free
-- ZSETs (its neighbours are allocated: it is the tail of a maximal extent), the records (one
-- HSET per bucket), the buckets' index entries (ZADD LT: a bucket's score is its oldest pending
-- ms) and the counters.
local function alloc_end(st)
  local stag = st.stag
  if st.hk ~= nil then
    local hoff, hlen = alloc_held(st)
    alloc_add_free(stag, hoff, hlen)
    st.hk, st.ho, st.hl = nil, nil, nil
  end
  if st.count > 0 then
    local ms = string.format('%d', st.now)
    for _, b in ipairs(st.order) do
      variadic('HSET', K.alloc(stag, b), st.buckets[b])
      redis.call('ZADD', K.alloc_index(stag), 'LT', ms, b)
    end
    local seg = st.seg
    seg.allocated = u64_add(seg.allocated, u64_add(st.total, u64_of(st.tn)))
    seg.n = seg.n + st.count
    seg.np = seg.np + st.count
    seg.dirty = true
    alloc_flush(seg)
  end
  st.buckets, st.order, st.total, st.tn, st.count = {}, {}, U64_ZERO, 0, 0
  if alloc_cst == st then
    alloc_cst = nil
  end
end

-- Releases allocations of segment stag (items: {offset (u64), put id} pairs, in any order), each
-- only if the record at its offset carries its put id; an offset that is not a u64, in no
-- record, or repeated (released once) is skipped. One HMGET, one HDEL and one EXISTS per record
-- bucket touched, not per item; the freed extents are merged among themselves before they go
-- into the free ZSETs (a pass's frees are mostly neighbours: one request's buffers were carved
-- in a row), so a run of neighbours costs one alloc_insert_free. The free ZSETs end as releasing
-- one by one would leave them: every free extent merged with its neighbours.
-- Returns the lengths released (u64; U64_ZERO for an item skipped), in items order. The caller
-- writes the counters (alloc_flush(alloc_seg(stag))). A freed pending record leaves its
-- bucket's index score as it was: a lower bound still.
local function alloc_release_batch(stag, items)
  local lens, seg = {}, alloc_seg(stag)
  local buckets, order = {}, {}
  for i, it in ipairs(items) do
    lens[i] = U64_ZERO
    if seg.ak and u64_valid(it[1]) then
      local b, rel = alloc_bucket(it[1], seg.ak)
      local bk = buckets[b]
      if not bk then
        bk = { rels = {}, at = {} }
        buckets[b] = bk
        order[#order + 1] = b
      end
      bk.rels[#bk.rels + 1] = rel
      bk.at[#bk.at + 1] = i
    end
  end
  local freed = {}
  for _, b in ipairs(order) do
    local bk, bkey = buckets[b], K.alloc(stag, b)
    local recs = redis.call('HMGET', bkey, unpack(bk.rels))
    local del, done = {}, {}
    for j, rel in ipairs(bk.rels) do
      local i, rec = bk.at[j], recs[j]
      if rec and not done[rel] then
        local len, rpid, ms = alloc_parse(rec)
        if rpid == items[i][2] then
          done[rel] = true
          del[#del + 1], del[#del + 2] = rel, rel .. 'k'
          lens[i] = len
          seg.allocated = alloc_sub(seg.allocated, len) or U64_ZERO
          seg.n = seg.n - 1
          if ms then
            seg.np = seg.np - 1
          end
          freed[#freed + 1] = { items[i][1], len }
        end
      end
    end
    if #del > 0 then
      variadic('HDEL', bkey, del)
      seg.dirty = true
      if redis.call('EXISTS', bkey) == 0 then
        redis.call('ZREM', K.alloc_index(stag), b)
      end
    end
  end
  table.sort(freed, function(x, y) return x[1] < y[1] end) -- u64: text order is number order
  local k = 1
  while k <= #freed do
    local off, len = freed[k][1], freed[k][2]
    local stop = alloc_add(off, len)
    k = k + 1
    while k <= #freed and freed[k][1] == stop do
      len = alloc_add(len, freed[k][2])
      stop = alloc_add(off, len)
      k = k + 1
    end
    alloc_insert_free(stag, off, len)
  end
  return lens
end

-- Segment batch scripts: KEYS holds the first segment anchor on a cluster (every anchor on
-- standalone Redis); ARGV: group count, then per group: anchor (<segment tag>:info), n, items.
local function each_segment(fn)
  local groups = argn()
  for _ = 1, groups do
    local anchor = arg()
    local n = argn()
    fn(K.tag(anchor), anchor, n)
  end
end

-- segment_info's row of the segment at anchor: {} if unknown, else {name, base, size,
-- te_endpoint, protocol, client_id, allocated, mounted, alloc record count, pending count}.
local function segment_info_row(anchor)
  local f = redis.call('HMGET', anchor, 'name', 'base', 'size', 'te_endpoint', 'protocol',
    'client_id', 'allocated', 'mounted', F.info.allocations, F.info.pending)
  if not f[3] then
    return {}
  end
  return f
end

-- alloc_free's step (also outbox_apply's first part): the segment groups of ARGV, each n pairs
-- (offset (u64 hex), put id), released where the record at the offset has that put id; returns
-- the bytes freed (decimal string).
local function alloc_free_groups()
  -- The sum freed: freed (decimal) + freedn (a number below 2^52, exact; lengths past that go
  -- to the decimal at once).
  local freed, freedn = '0', 0
  each_segment(function(stag, anchor, n)
    local items = {}
    for i = 1, n do
      items[i] = { arg(), arg() }
    end
    for _, len in ipairs(alloc_release_batch(stag, items)) do
      local v = u64_small(len)
      if v then
        freedn = freedn + v
        if freedn >= 4503599627370496 then -- 2^52
          freed, freedn = dec_add(freed, string.format('%d', freedn)), 0
        end
      else
        freed = dec_add(freed, u64_to_dec(len))
      end
    end
    alloc_flush(alloc_seg(stag))
  end)
  if freedn > 0 then
    freed = dec_add(freed, string.format('%d', freedn))
  end
  return freed
end
