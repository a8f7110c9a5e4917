-- registry.lua: slaves joining, beating and listed; admin requests.

-- heartbeat: register or refresh a slave, stamped with Redis's clock so
-- that slaves' clocks never matter; a slave's first heartbeat (or its
-- first after being declared dead or leaving) records a join. The
-- heartbeat goes to the slave's own key (Keys.SlaveBeat); the registry
-- only gains the slave (ZADD NX), which is all a slave's Redis user may do
-- to it (acl.go).
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, heartbeat_json (a JSON object of at most
-- LIMITS.heartbeat bytes), host (at most LIMITS.host bytes).
-- Returns: {joined (1 when the slave joined, else 0), then the control
-- fields (control.go) addressed to it: drain:<slave> and every
-- retire:<proxy>}.
register('heartbeat', function()
  arg_count(4)
  local slave = check_slave(ARGV[2])
  local info, host = str(3, LIMITS.heartbeat, 'heartbeat'), str(4, LIMITS.host, 'host')
  local ok, hb = pcall(cjson.decode, info)
  if not ok or type(hb) ~= 'table' then fail('heartbeat is not a JSON object') end
  check_own(slave)
  local now = now_ms()
  if not redis.call('ZSCORE', K_SLAVES, slave) and redis.call('ZCARD', K_SLAVES) >= LIMITS.slaves then
    fail('the registry holds ' .. LIMITS.slaves .. ' slaves: no more may join (the master drops members that are no slave)')
  end
  local added = redis.call('ZADD', K_SLAVES, 'NX', now, slave)
  local had = redis.call('EXISTS', k_sbeat(slave))
  redis.call('SET', k_sbeat(slave), now .. '\t' .. info)
  if added == 1 or had == 0 then
    emit('slave', cjson.encode({crawl = CRAWL, slave = slave, kind = 'join', host = host, at = now, detail = ''}))
    flush_events()
  end
  local out = {added}
  local drain = 'drain:' .. slave
  for _, k in ipairs(redis.call('HKEYS', K.CONTROL)) do
    if k == drain or string.sub(k, 1, 7) == 'retire:' then out[#out + 1] = k end
  end
  return out
end, {settings = false})

-- registered lists the registry with each slave's heartbeat: a flat
-- array, 3 entries per registered slave: id, registered at (ms), and its
-- heartbeat key's value (ms \t JSON) or false; and, with in_flight, the
-- number of leases held over every registered slave after them
local function registered(in_flight)
  local out = {}
  local reg = FRESH.registry(true)
  for k = 1, #reg, 2 do
    out[#out + 1] = reg[k]
    out[#out + 1] = reg[k + 1]
    out[#out + 1] = redis.call('GET', k_sbeat(reg[k]))
  end
  if in_flight then
    local leased = 0
    for k = 1, #reg, 2 do leased = leased + redis.call('ZCARD', k_slease(reg[k])) end
    out[#out + 1] = leased
  end
  return out
end

-- registry: the registered slaves (registered).
--
-- KEYS: the meta key.
-- ARGV: prefix.
-- Returns: 3 entries per registered slave (registered).
register('registry', function()
  arg_count(1)
  return registered(false)
end, {settings = false, flags = {'no-writes'}})

-- snapshot: the registered slaves and the leases in flight, in Snapshot's
-- pipeline.
--
-- KEYS: the meta key.
-- ARGV: prefix.
-- Returns: registry's result, then the number of leases held.
register('snapshot', function()
  arg_count(1)
  return registered(true)
end, {settings = false, flags = {'no-writes'}})

-- drain: mark a registered slave as draining (control.go).
--
-- KEYS: the meta key.
-- ARGV: prefix, slave.
-- Returns: 1 when the slave is registered (and now draining), else 0.
register('drain', function()
  master_only()
  arg_count(2)
  local slave = check_slave(ARGV[2])
  if not redis.call('ZSCORE', K_SLAVES, slave) then return 0 end
  redis.call('HSET', K.CONTROL, 'drain:' .. slave, now_ms())
  return 1
end, {settings = false})
