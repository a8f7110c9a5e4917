-- lease.lua: leases extended, taken back and given back.

-- lose takes back one lease: the host slot is freed and kept idle for a
-- delay (the lost fetch may still have reached the site), the task is
-- requeued at the front of its queue (into its pq with the priority and
-- aopic strategies, keeping its score; a render task into its host's render
-- queues) with its attempt counted, or failed when its attempts are used,
-- and a lost record goes to the event stream. zkey and hkey are the lease
-- zset and hash that hold it: the slave's own (Keys.SlaveLease,
-- SlaveLeaseData).
local function lose(zkey, hkey, url, data, reason, now)
  local d = lease_fields(data)
  local slave, leased_at, host, prio, task = d[1], tonumber(d[3]), d[4], d[5], d[6]
  redis.call('ZREM', zkey, url)
  redis.call('HDEL', hkey, url)
  if not task or not tonumber(prio) then
    -- lease data no function wrote (a slave's raw HSET): dropped
    stat('refused', 1)
    return
  end
  host_done(host)
  local cur = host_next(host)
  local hd = host_delay(host)
  if after(now, hd) > cur then hset(K_HNEXT, host, after(now, hd)) end
  local attempt, failed, nt = requeue_or_fail(host, prio, task, 'lease lost: ' .. reason, now, slave)
  if not failed then push(host, prio, nt, true) end
  ready_host(host)
  stat('lost', 1)
  emit('lost', cjson.encode({crawl = CRAWL, url = url, slave = slave, leased_at = leased_at,
    detected_at = now, attempt = attempt, reason = reason}))
end

-- beat_host is the host name in a slave's last heartbeat, '' when none
local function beat_host(slave)
  local beat = redis.call('GET', k_sbeat(slave))
  if not beat then return '' end
  local ok, hb = pcall(cjson.decode, string.match(beat, '^[^\t]*\t(.*)$') or '')
  if ok and type(hb) == 'table' and type(hb.host) == 'string' then return hb.host end
  return ''
end

-- lose_all takes back every lease a slave holds; it returns how many. A
-- slave holds at most LIMITS.held leases (claim's held_cap): lease data
-- past that is a slave's raw HSETs, of which only the leases of its
-- lease zset's first LIMITS.held are taken back, and the rest dropped
-- unread (UNLINK frees them outside the call).
local function lose_all(slave, reason, now)
  local zkey, hkey = k_slease(slave), k_sld(slave)
  local n = 0
  if redis.call('HLEN', hkey) <= LIMITS.held then
    local all = redis.call('HGETALL', hkey)
    for k = 1, #all, 2 do
      lose(zkey, hkey, all[k], all[k + 1], reason, now)
    end
    n = #all / 2
  else
    local urls = redis.call('ZRANGE', zkey, 0, LIMITS.held - 1)
    local data = hmget(hkey, urls)
    for k, url in ipairs(urls) do
      if data[k] then
        lose(zkey, hkey, url, data[k], reason, now)
        n = n + 1
      end
    end
    stat('refused', 1)
    redis.call('UNLINK', hkey)
  end
  redis.call('UNLINK', zkey)
  return n
end

-- expire_in takes back up to limit leases of one lease zset whose deadline
-- passed; it returns how many it looked at
local function expire_in(zkey, hkey, now, limit)
  if limit <= 0 then return 0 end
  local urls = redis.call('ZRANGEBYSCORE', zkey, '-inf', now, 'LIMIT', 0, limit)
  for _, url in ipairs(urls) do
    local data = redis.call('HGET', hkey, url)
    if data then
      lose(zkey, hkey, url, data, 'expired', now)
    else
      redis.call('ZREM', zkey, url)
    end
  end
  return #urls
end

-- extend: push the deadlines of leases this slave still holds, to now +
-- the crawl's lease duration.
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, n (1 to LIMITS.completions), then n × (url, token).
-- Returns: n values, 1 when the lease was held and extended, 0 when lost.
register('extend', function()
  local slave = check_slave(ARGV[2])
  local n = int(3, 1, LIMITS.completions, 'n')
  arg_count(3 + 2 * n)
  check_own(slave)
  local now = now_ms()
  local out = {}
  for e = 0, n - 1 do
    local url, token = ARGV[4 + 2 * e], ARGV[5 + 2 * e]
    local data = redis.call('HGET', k_sld(slave), url)
    local ok = 0
    if data then
      local d = lease_fields(data)
      if d[1] == slave and d[2] == token then
        redis.call('ZADD', k_slease(slave), 'XX', now + C.LEASE_MS, url)
        ok = 1
      end
    end
    out[#out + 1] = ok
  end
  return out
end)

-- recover_expired: take back leases whose deadline passed, in the lease
-- zsets of the registry's slaves from rank from on, LIMITS.recover_page
-- slaves a call: a caller walks the
-- registry (FRESH.registry's part of it) in calls that each stay short,
-- however many slaves there are.
--
-- KEYS: the meta key.
-- ARGV: prefix, limit (1 to LIMITS.recover), from (0 to LIMITS.slaves).
-- Returns: {the number of leases taken back, the rank to go on from: 0
-- when the walk is done}.
register('recover_expired', function()
  master_only()
  arg_count(3)
  local limit = int(2, 1, LIMITS.recover, 'limit')
  local from = int(3, 0, LIMITS.slaves, 'from')
  local now = now_ms()
  local n = 0
  local last = math.min(from + LIMITS.recover_page, LIMITS.slaves) - 1
  local slaves = {}
  if last >= from then slaves = redis.call('ZRANGE', K_SLAVES, from, last) end
  for _, slave in ipairs(slaves) do
    n = n + expire_in(k_slease(slave), k_sld(slave), now, limit - n)
  end
  finish()
  local next = 0
  if #slaves == last - from + 1 and last + 1 < LIMITS.slaves and n < limit then next = last + 1 end
  return {n, next}
end)

-- retire: remove a slave from the registry and take back every lease it
-- still holds, recording its death or leave. The master runs it: it
-- writes the registry, the control hash and the slave's own keys.
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, kind (death, leave or gone), detail, record (1:
-- record the death or leave here).
-- Returns: the number of leases taken back.
register('retire', function()
  master_only()
  arg_count(5)
  local slave = check_slave(ARGV[2])
  local kind, detail, record = ARGV[3], str(4, LIMITS.reason, 'detail'), flag(5, 'record')
  if kind ~= 'death' and kind ~= 'leave' and kind ~= 'gone' then fail('kind must be death, leave or gone') end
  local now = now_ms()
  local reason = 'slave_dead'
  if kind == 'leave' then reason = 'slave_left' end
  local n = lose_all(slave, reason, now)
  local host = beat_host(slave)
  -- the sink reads the slave's stream until it is drained (Stream)
  if redis.call('EXISTS', k_sev(slave)) == 1 then redis.call('SADD', K.STREAMS, k_sev(slave)) end
  local removed = redis.call('ZREM', K_SLAVES, slave)
  redis.call('DEL', k_sbeat(slave), k_sld(slave))
  -- gone: the slave left (its leave is recorded) or was retired before; a
  -- lease it still holds makes it a death
  if kind == 'gone' then
    if n > 0 then kind = 'death' else removed = 0 end
  end
  redis.call('HDEL', K.CONTROL, 'drain:' .. slave)
  if record and (removed == 1 or n > 0) then
    if n > 0 then detail = detail .. '; ' .. n .. ' leases taken back' end
    emit('slave', cjson.encode({crawl = CRAWL, slave = slave, kind = kind, host = host, at = now, detail = detail}))
  end
  finish()
  return n
end)

-- leave: a slave's own graceful leave: it gives back the leases it still
-- holds, records its leave and deletes its heartbeat. It writes only the
-- slave's own keys and what a claim writes (queues, stats, events), so a
-- slave's restricted Redis user may run it; the master's monitor then
-- drops the slave from the registry (RetireGone).
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, detail, record (1: record the leave here; shard 0
-- of a sharded crawl).
-- Returns: the number of leases given back.
register('leave', function()
  arg_count(4)
  local slave = check_slave(ARGV[2])
  local detail, record = str(3, LIMITS.reason, 'detail'), flag(4, 'record')
  check_own(slave)
  local now = now_ms()
  local n = lose_all(slave, 'slave_left', now)
  local host = beat_host(slave)
  redis.call('DEL', k_sbeat(slave), k_sld(slave))
  if n > 0 then detail = detail .. '; ' .. n .. ' leases taken back' end
  if record then
    emit('slave', cjson.encode({crawl = CRAWL, slave = slave, kind = 'leave', host = host, at = now, detail = detail}))
  end
  finish()
  return n
end)
