-- dedup.lua: seen URLs, exact (fingerprint buckets) or Bloom.

-- a URL's k Bloom bits are g = a, a+b, a+2b, ... (mod m), bit g being bit
-- g mod BLOOM_SEG of segment floor(g / BLOOM_SEG); a and b are below m, so
-- every sum is exact (bloom.go). Segment key names are kept per prefix
-- (K.bloom: name_cache in base.lua)
local function bloom_key(seg)
  local key = K.bloom[seg]
  if not key then
    key = K.BLOOM_PFX .. seg
    MEM.name_cache('bloom')[seg] = key
  end
  return key
end

-- bloom_add sets a URL's k bits and reports whether one was 0 (the URL is
-- new): GETBIT up to the first 0, then SETBIT from there, so a seen URL
-- writes nothing and a new one costs at most k+1 calls
local function bloom_add(a, b)
  local g, new = a, false
  for _ = 1, C.BLOOM_K do
    local seg = math.floor(g / C.BLOOM_SEG)
    local key, off = bloom_key(seg), g - seg * C.BLOOM_SEG
    if new then
      redis.call('SETBIT', key, off, 1)
    elseif redis.call('GETBIT', key, off) == 0 then
      new = true
      redis.call('SETBIT', key, off, 1)
    end
    g = g + b
    if g >= C.BLOOM_M then g = g - C.BLOOM_M end
  end
  return new
end

-- Exact dedup's seen buckets grow with the crawl by linear hashing. The seen table has a level b, a split pointer
-- s and a count n in meta (seen_level, seen_split, seen_count; absent:
-- SEEN_FLOOR, 0, 0). A fingerprint's bucket is its low b bits, or its low
-- b+1 bits when those b are below s: a tuple's x is the low 32 bits and
-- its member y the top 56 bits, both decimal, so bucket and member keep
-- all 64 bits. When n passes C.SEEN_LOAD × (2^b + s), bucket s is split:
-- the members whose fingerprint bit b is set move to bucket s + 2^b; s
-- steps on, and once it reaches 2^b the level goes up and s starts again
-- at 0. A bucket thus holds SEEN_LOAD to 2 × SEEN_LOAD members on average
-- whatever the crawl's size (redis.go: seenLoad), a set of integers
-- (intset: 8 bytes a member). The state is read once per call (LH.state)
-- and written back by finish (LH.flush).
local LH = {}
-- LH.state returns the seen table's state {b, p = 2^b, s, n, dirty,
-- split_dirty}, read from meta the first time a call asks, with the mark
-- of waiting slaves (LH.wait_mark) unless the call knows it already
function LH.state()
  if not lh_state then
    local r = redis.call('HMGET', K_META, 'seen_level', 'seen_split', 'seen_count', 'wait_until')
    if CALL.wait_until == nil then CALL.wait_until = r[4] end
    local b = tonumber(r[1] or SEEN_FLOOR)
    lh_state = {b = b, p = 2 ^ b, s = tonumber(r[2] or '0'), n = tonumber(r[3] or '0')}
  end
  return lh_state
end
-- LH.bucket_key returns the key of the seen bucket of a tuple's x. The
-- names it makes are kept in the crawl's key table (K.seen_names, within
-- the bounds of name_cache in base.lua): a name is made once, not once a
-- link.
-- An x that is no number (not a slave's honest tuple) still names a
-- bucket, and an h that is NaN is not kept (no table takes NaN as key).
function LH.bucket_key(x)
  local st = lh_state or LH.state()
  local lo = tonumber(x) or 0
  local h = lo % st.p
  if h < st.s then h = lo % (2 * st.p) end
  local key = K.seen_names[h]
  if not key then
    key = K_SEEN_PFX .. string.format('%x', h)
    if h == h then MEM.name_cache('seen_names')[h] = key end
  end
  return key
end
-- LH.bit returns bit k of a member (decimal, below 2^56): a number's value
-- mod 2^(k+1) is that of its last k+1 digits (2^(k+1) divides 10^(k+1)),
-- exact in a double up to 15 digits, so k <= 14 (SEEN_MAX_LEVEL)
function LH.bit(m, k)
  return math.floor((tonumber(string.sub(m, -(k + 1))) or 0) / 2 ^ k) % 2
end
-- LH.split moves the members of bucket s whose fingerprint bit b (member
-- bit b-8: LH.bit) is set to bucket s + 2^b. A bucket past 512
-- members (Redis's default set-max-intset-entries) may have left its
-- intset: it is emptied and written again, an intset once more.
function LH.split(st)
  local from = K_SEEN_PFX .. string.format('%x', st.s)
  local to = K_SEEN_PFX .. string.format('%x', st.s + st.p)
  local all = redis.call('SMEMBERS', from)
  local k = st.b - 8
  local move, keep = {}, {}
  for i = 1, #all do
    local m = all[i]
    if LH.bit(m, k) == 1 then
      move[#move + 1] = m
    else
      keep[#keep + 1] = m
    end
  end
  if #move > 0 then
    call_chunked('SADD', to, move, 1)
    if #all > 512 then
      call_chunked('SREM', from, all, 1)
      if #keep > 0 then call_chunked('SADD', from, keep, 1) end
    else
      call_chunked('SREM', from, move, 1)
    end
  end
  st.s = st.s + 1
  if st.s == st.p then
    st.b, st.p, st.s = st.b + 1, 2 * st.p, 0
  end
  st.split_dirty = true
end
-- LH.added counts a member added and splits a bucket when the table is
-- over its load
function LH.added()
  local st = lh_state or LH.state()
  st.n = st.n + 1
  st.dirty = true
  if st.n > C.SEEN_LOAD * (st.p + st.s) and st.b < SEEN_MAX_LEVEL then LH.split(st) end
end
-- LH.flush writes the seen table's changed state to meta (from finish):
-- its count, and level and split pointer after a split
function LH.flush()
  local st = lh_state
  if not st or not st.dirty then return end
  if st.split_dirty then
    redis.call('HSET', K_META, 'seen_count', nstr(st.n), 'seen_level', nstr(st.b), 'seen_split', nstr(st.s))
  else
    redis.call('HSET', K_META, 'seen_count', nstr(st.n))
  end
  st.dirty, st.split_dirty = false, false
end

-- seen_args reports whether a tuple's seen arguments (x, y) have the
-- form the Bloom filter relies on: Bloom positions, whole
-- numbers below m (a larger one would grow a segment past the filter). Growing buckets
-- take any x and y: their code reads them so that none can fail half way
-- (LH.bucket_key, LH.bit), and a y that is not a number only costs its
-- bucket its intset encoding.
local function seen_args(x, y)
  if not BLOOM then return true end
  local a, b = tonumber(x), tonumber(y)
  return a ~= nil and b ~= nil and a >= 0 and b >= 0 and a % 1 == 0 and b % 1 == 0 and a < C.BLOOM_M and b < C.BLOOM_M
end

-- seen_add records a tuple's URL (x, y) as seen and reports whether it was
-- new: a member of a fingerprint bucket, or the Bloom filter's bits (a and b: bloom.go). Its caller has
-- checked the arguments (seen_args) unless the buckets grow.
local function seen_add(x, y)
  if BLOOM then return bloom_add(tonumber(x), tonumber(y)) end
  if redis.call('SADD', LH.bucket_key(x), y) == 0 then return false end
  LH.added()
  return true
end

-- seen_has reports whether a tuple's URL is seen, writing nothing: with
-- bloom, whether all of its k bits are set
local function seen_has(x, y)
  if BLOOM then
    local g, b = tonumber(x), tonumber(y)
    for _ = 1, C.BLOOM_K do
      local seg = math.floor(g / C.BLOOM_SEG)
      if redis.call('GETBIT', bloom_key(seg), g - seg * C.BLOOM_SEG) == 0 then return false end
      g = g + b
      if g >= C.BLOOM_M then g = g - C.BLOOM_M end
    end
    return true
  end
  return redis.call('SISMEMBER', LH.bucket_key(x), y) == 1
end
