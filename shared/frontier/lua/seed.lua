-- seed.lua: work added from outside a page's completion: seeds, recrawls,
-- failed tasks requeued, and links for another shard.

-- check_tuples checks that n tuples from ARGV[at] on fit the arguments
local function check_tuples(at, n)
  if at + TUPLE * n - 1 > #ARGV then fail('tuples run past the arguments') end
end

-- seed: enqueue seeds that were never seen. With scope by seeds (the
-- crawl's settings) the seeds' host names become the crawl's host scope.
-- Seeds count towards the trap caps but are never dropped by them; a seed
-- whose tuple is malformed is refused and counted (refuse). Host policies
-- come first, so the seeds of a host are queued under its policy; a
-- policy already in force costs no write (set_policy).
--
-- KEYS: the meta key.
-- ARGV: prefix, n, np (each 0 to LIMITS.batch), then np × policy (host,
-- delay_ms, jitter, conc: see complete), then n × tuple (bucket, field,
-- host, scope_host, prio, task, qvar).
-- Returns: the number of seeds enqueued.
register('seed', function()
  master_only()
  local n, np = int(2, 0, LIMITS.batch, 'n'), int(3, 0, LIMITS.batch, 'np')
  arg_count(3 + 4 * np + TUPLE * n)
  check_policies(4, np)
  set_policies(4, np)
  local added = 0
  for s = 0, n - 1 do
    local j = 4 + 4 * np + TUPLE * s
    if not link_args(j) then
      refuse(ARGV[j + 5], 'malformed seed arguments')
    else
      local why = check_task(ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5], 0)
      if why then
        refuse(ARGV[j + 5], why)
      else
        if SCOPE_BY_SEEDS then
          local key, m = FRESH.scope_fp(ARGV[j + 3])
          redis.call('SADD', key, m)
        end
        if seen_add(ARGV[j], ARGV[j + 1]) then
          admit(ARGV[j + 2], ARGV[j + 6], false, ARGV[j + 5])
          push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
          stat('seen', 1)
          added = added + 1
        end
      end
    end
  end
  finish()
  return added
end)

-- reseed: enqueue tasks again whether seen or not (a recrawl), except a
-- URL that is leased or already queued in its host's queue of its
-- priority (bfs, dfs) or its host's pq (priority, aopic), and one out of
-- the crawl's host scope (FRESH.scope_ok: what a page recorded in MySQL names
-- never takes the crawl outside its seeds' hosts or crawl.allow_hosts).
-- Trap caps are not counted again.
--
-- A task with validators (Task.Revisit, encoded by encodeValidators) has
-- them written to the val hash when it is enqueued, for the claim that
-- leases it (recrawl.go); a URL leased or queued keeps what it has.
--
-- KEYS: the meta key.
-- ARGV: prefix, n, np (each 0 to LIMITS.batch), then np × policy (see
-- seed), then n × tuple, then n × validators ('' for none).
-- Returns: the number of tasks enqueued.
register('reseed', function()
  master_only()
  local n, np = int(2, 0, LIMITS.batch, 'n'), int(3, 0, LIMITS.batch, 'np')
  arg_count(3 + 4 * np + (TUPLE + 1) * n)
  check_policies(4, np)
  set_policies(4, np)
  -- leased: whether a slave holds url of
  -- host: only a host with requests in flight has one, and the slaves are
  -- the registry's first LIMITS.slaves (FRESH.registry)
  local slaves
  local function leased(host, url)
    if host_infl(host) <= 0 then return false end
    slaves = slaves or FRESH.registry()
    for _, s in ipairs(slaves) do
      if redis.call('HEXISTS', k_sld(s), url) == 1 then return true end
    end
    return false
  end
  local added = 0
  local in_scope = {}
  local vbase = 4 + 4 * np + TUPLE * n
  for s = 0, n - 1 do
    local j = 4 + 4 * np + TUPLE * s
    local host, prio, task = ARGV[j + 2], ARGV[j + 4], ARGV[j + 5]
    local why
    if not link_args(j) then
      why = 'malformed seed arguments'
    else
      why = check_task(host, ARGV[j + 3], prio, task, 0)
    end
    if not why and not FRESH.scope_ok(ARGV[j + 3], in_scope) then why = 'out of the crawl\'s host scope' end
    if why then
      refuse(task, why)
    else
      local url = task_url(task)
      local r = is_render(task)
      local queued
      if leased(host, url) then
        queued = true
      elseif PQ then
        queued = redis.call('ZSCORE', kq_pq(r, host), url) ~= false
      else
        queued = false
        local fv = hget(K_FRESH, host)
        for _, e in ipairs(fv and FRESH.decode(host, fv) or {}) do
          if e[1] == prio and e[2] == task then queued = true end
        end
        queued = queued or redis.call('LPOS', kq_queue(r, host, prio), task) ~= false
      end
      if not queued then
        seen_add(ARGV[j], ARGV[j + 1])
        push(host, prio, task, NEW_FRONT)
        local val = ARGV[vbase + s]
        if val ~= '' then redis.call('HSET', K.VAL, url, val) end
        added = added + 1
      end
    end
  end
  if added > 0 then stat('reseeded', added) end
  finish()
  return added
end)

-- requeue_failed: move up to limit failed tasks back to their queues with
-- their attempts reset, oldest failure first.
--
-- KEYS: the meta key.
-- ARGV: prefix, limit (1 to LIMITS.batch).
-- Returns: the number of tasks requeued.
register('requeue_failed', function()
  master_only()
  arg_count(2)
  local limit = int(2, 1, LIMITS.batch, 'limit')
  local n = 0
  local in_scope = {}
  for _ = 1, limit do
    local e = redis.call('LPOP', K.FAILED)
    if not e then break end
    local f = splitn(e, 4)
    local host, prio, task = f[2], f[3], f[4]
    local t = task and splitn(task, 4)
    if t and t[4] and tonumber(prio) and host and FRESH.scope_ok(FRESH.scope_host(host), in_scope) then
      push(host, prio, t[1] .. '\t' .. t[2] .. '\t0\t' .. t[4], false)
      n = n + 1
    else
      -- an entry no function wrote (a slave's raw RPUSH), or of a host
      -- out of the crawl's scope: dropped
      stat('refused', 1)
    end
  end
  if n > 0 then
    stat('failed', -n)
    stat('requeued', n)
  end
  finish()
  return n
end)

-- links: enqueue links found on a page of another shard, as complete does
-- with a page's links: checks, scope, dedup, trap caps, the hosts'
-- policies first. A slave runs it under its own Redis user (its trap
-- exceptions go to its own stream on this shard, and it registers here so
-- the sink reads that stream).
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, np, n (each 0 to LIMITS.batch), then np × policy,
-- then n × tuple.
-- Returns: the number of links enqueued.
register('links', function()
  local slave = check_slave(ARGV[2])
  local np, n = int(3, 0, LIMITS.batch, 'np'), int(4, 0, LIMITS.batch, 'n')
  arg_count(4 + 4 * np + TUPLE * n)
  check_policies(5, np)
  check_own(slave)
  local now = now_ms()
  set_policies(5, np)
  local in_scope = {}
  local added = 0
  for l = 0, n - 1 do
    local j = 5 + 4 * np + TUPLE * l
    local took = take_link(j, in_scope, slave, now)
    if took == 'new' then
      push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
      added = added + 1
    elseif took == 'old' and C.STRATEGY == 'priority' then
      backlink(j)
    end
  end
  if #ev_buf > 0 then redis.call('ZADD', K_SLAVES, 'NX', now, slave) end
  finish()
  return added
end)
