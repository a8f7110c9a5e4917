-- admin.lua: a crawl's creation, its masters, its streams, and read-only
-- looks into its dedup.

local STRATEGIES = {bfs = true, dfs = true, priority = true, aopic = true}

-- init: fix a shard's strategy, dedup mode (with bloom, the filter's
-- bloom_m, bloom_k and bloom_seg), content_bits and key layout the first
-- time any process opens it. A shard made by another key layout is not
-- touched: the caller refuses it (redis.go: newShard).
--
-- KEYS: the meta key.
-- ARGV: prefix, strategy, dedup, bloom_m, bloom_k, bloom_seg,
-- content_bits, layout.
-- Returns: the shard's layout ('' when it has none), strategy, dedup,
-- bloom_m, bloom_k, bloom_seg (false when not bloom), content_bits and 1
-- when this call created the shard.
register('init', function()
  arg_count(8)
  if not STRATEGIES[ARGV[2]] then fail('unknown strategy') end
  if ARGV[3] ~= 'exact' and ARGV[3] ~= 'bloom' then fail('unknown dedup mode') end
  for i = 4, 6 do int(i, 0, 68719476736, 'a bloom size') end
  local cbits = int(7, 1, 24, 'content_bits')
  local layout = str(8, 16, 'layout')
  local created = 0
  local cur = redis.call('HMGET', K_META, 'layout', 'strategy')
  if not cur[2] and (not cur[1] or cur[1] == layout) then
    created = 1
    redis.call('HSET', K_META, 'layout', layout, 'strategy', ARGV[2], 'dedup', ARGV[3], 'content_bits', cbits)
    if ARGV[3] == 'bloom' then
      redis.call('HSET', K_META, 'bloom_m', ARGV[4], 'bloom_k', ARGV[5], 'bloom_seg', ARGV[6])
    end
  end
  local r = redis.call('HMGET', K_META, 'layout', 'strategy', 'dedup', 'bloom_m', 'bloom_k', 'bloom_seg',
    'content_bits')
  r[1] = r[1] or ''
  r[8] = created
  return r
end, {settings = false})

-- shard_count: fix a crawl's shard count, its shards' hash tags
-- (placement.go) and its key layout in shard 0's meta the first time any
-- process opens it. A crawl whose meta exists without a shard count was
-- made by another key layout: nothing is written, and the caller refuses
-- it.
--
-- KEYS: shard 0's meta key.
-- ARGV: prefix, the count asked for (1 to LIMITS.shards), the tags of
-- shards 1 and up, comma-separated ('' for one shard), layout.
-- Returns: {the crawl's count (0 when refused), its tags, its layout
-- ('' when it has none)}.
register('shard_count', function()
  arg_count(4)
  local want = int(2, 1, LIMITS.shards, 'shards')
  local tags = str(3, 100 * LIMITS.shards, 'tags')
  local layout = str(4, 16, 'layout')
  local cur = redis.call('HMGET', K.META, 'shards', 'shard_tags', 'layout')
  if cur[1] then return {tonumber(cur[1]), cur[2] or '', cur[3] or ''} end
  if redis.call('EXISTS', K.META) == 1 then return {0, '', cur[3] or ''} end
  redis.call('HSET', K.META, 'shards', want, 'shard_tags', tags, 'layout', layout)
  return {want, tags, layout}
end, {settings = false})

-- own: renew, take or give back this shard's owner lease (owner.go).
--
-- KEYS: the meta key.
-- ARGV: prefix, master, ttl_ms, want (1: keep or take, 0: give back).
-- Returns: 1 when the master owns the shard after the call, else 0.
register('own', function()
  master_only()
  arg_count(4)
  local master, ttl, want = str(2, 256, 'master'), int(3, 0, 86400000, 'ttl_ms'), flag(4, 'want')
  local cur = redis.call('GET', K.OWNER)
  if cur == master then
    if want and ttl > 0 then
      redis.call('PEXPIRE', K.OWNER, ttl)
      return 1
    end
    redis.call('DEL', K.OWNER)
    return 0
  end
  if want and ttl > 0 and not cur then
    redis.call('SET', K.OWNER, master, 'PX', ttl)
    return 1
  end
  return 0
end, {settings = false})

-- masters: register a master as alive in shard 0 and forget the ones not
-- seen for stale_ms.
--
-- KEYS: the meta key.
-- ARGV: prefix, master, stale_ms.
-- Returns: the number of masters alive.
register('masters', function()
  master_only()
  arg_count(3)
  local master, stale = str(2, 256, 'master'), int(3, 0, 86400000, 'stale_ms')
  local now = now_ms()
  redis.call('ZADD', K.MASTERS, now, master)
  redis.call('ZREMRANGEBYSCORE', K.MASTERS, '-inf', now - stale)
  return redis.call('ZCARD', K.MASTERS)
end, {settings = false})

-- drop_stream: delete a slave's event stream once the slave has left the
-- registry and every entry was read and acknowledged (Ack deletes them),
-- and forget it; atomic, so an event the slave adds meanwhile is never
-- lost.
--
-- KEYS: the meta key.
-- ARGV: prefix, slave.
-- Returns: 1 when dropped, else 0.
register('drop_stream', function()
  master_only()
  arg_count(2)
  local slave = check_slave(ARGV[2])
  if redis.call('ZSCORE', K_SLAVES, slave) then return 0 end
  local key = k_sev(slave)
  if redis.call('EXISTS', key) == 1 and redis.call('XLEN', key) > 0 then return 0 end
  redis.call('DEL', key)
  redis.call('SREM', K.STREAMS, key)
  return 1
end, {settings = false})

-- seen_has: whether URLs are seen (all their Bloom bits set, or their
-- fingerprints in their buckets), writing nothing.
--
-- KEYS: the meta key.
-- ARGV: prefix, n (0 to LIMITS.batch), then n × (bucket, field): a tuple's
-- first two fields.
-- Returns: n values, 1 seen, 0 not.
register('seen_has', function()
  local n = int(2, 0, LIMITS.batch, 'n')
  arg_count(2 + 2 * n)
  local out = {}
  for s = 0, n - 1 do
    local x, y = ARGV[3 + 2 * s], ARGV[4 + 2 * s]
    if not seen_args(x, y) then fail('malformed seen arguments') end
    local has = 0
    if seen_has(x, y) then has = 1 end
    out[#out + 1] = has
  end
  return out
end, {flags = {'no-writes'}})

-- member_bit: bit k of a seen bucket member, as a split reads it (LH.bit).
--
-- KEYS: the meta key.
-- ARGV: prefix, member (decimal), k (0 to 14).
-- Returns: the bit, 0 or 1.
register('member_bit', function()
  arg_count(3)
  if not string.match(ARGV[2], '^%d+$') or #ARGV[2] > 17 then fail('member must be a decimal below 2^56') end
  return LH.bit(ARGV[2], int(3, 0, SEEN_MAX_LEVEL - SEEN_FLOOR - 1, 'k'))
end, {settings = false, flags = {'no-writes'}})

-- memory: what the library keeps between calls in Redis's Lua heap
-- (base.lua: keys_of, name_cache, sweep), for the tests and an admin's
-- look (master only: whether another crawl is served is not a slave's
-- business). The caller's own prefix has a key table (begin made it).
--
-- KEYS: the meta key.
-- ARGV: prefix, other (a crawl prefix, or empty).
-- Returns: {key tables, names held, settings kept, calls since the last
-- sweep, the Lua heap in KB (every library's: Redis runs them in one Lua
-- VM), 1 when other has a key table, else 0}.
register('memory', function()
  master_only()
  arg_count(2)
  local other = str(2, LIMITS.prefix, 'other')
  local has = 0
  if MEM.tables[other] then has = 1 end
  return {MEM.count, MEM.names, settings_count, MEM.calls - MEM.swept, math.floor(collectgarbage('count')), has}
end, {settings = false, flags = {'no-writes'}})
