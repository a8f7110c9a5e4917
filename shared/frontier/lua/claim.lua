-- claim.lua: leasing tasks.

-- fresh_scan returns up to maxn {host, value} of the fresh hash, walking
-- it with HSCAN from the crawl's fresh cursor (a small hash comes whole,
-- in the order its hosts came: FIFO), at most 16 steps, and keeps the
-- cursor. The cursor is only where the next walk starts, so it lives in
-- the library's memory (the crawl's key table, K.fresh_cursor), not in
-- Redis: a claim of a broad crawl saves an HGET and an HSET of meta, and a
-- cursor lost (the library loaded again, a failover) starts the walk over
-- at 0, as a new crawl's does. (Meta's fresh_cursor, written by library
-- version 6 and before, is no longer read.)
function FRESH.scan(maxn)
  local out, seen = {}, {}
  -- nothing to walk: the hash was empty and this call put nothing in it
  if FRESH.known_empty() and not CALL.fresh_added then return out end
  local start = K.fresh_cursor or '0'
  local cur, wraps = start, 0
  for _ = 1, 16 do
    local r = redis.call('HSCAN', K_FRESH, cur, 'COUNT', maxn)
    cur = r[1]
    local kv = r[2]
    local cache = hcache_of(K_FRESH)
    for k = 1, #kv, 2 do
      if #out < maxn and not seen[kv[k]] then
        seen[kv[k]] = true
        if cache[kv[k]] == nil then cache[kv[k]] = kv[k + 1] end
        out[#out + 1] = {kv[k], kv[k + 1]}
      end
    end
    if #out >= maxn then break end
    if cur == '0' then
      wraps = wraps + 1
      if wraps >= 2 or start == '0' then break end
    end
  end
  K.fresh_cursor = cur
  return out
end

-- claim_tasks leases up to maxn tasks for slave from hosts whose next
-- allowed time has come, first moving retries that are due back to their
-- queues, then writes the call's changes (finish). It appends the claim's
-- result (the function claim's Returns) to out and returns out.
--
-- Politeness: a host is in the ready set only while it has queued tasks and
-- fewer than its concurrency (host_conc) requests in flight. A claim takes
-- one task per host (all free slots when the delay is 0) and moves the
-- host's next allowed time to now + its jittered delay (JITTER_DIST),
-- so two request starts to one host are never closer than the delay, across
-- all slaves. With concurrency 1 the host leaves the ready set until the
-- lease ends, and a completion sets its next time from the end of the fetch.
--
-- Render: with render the claim also takes from rready, the hosts with
-- queued render tasks; both ready sets are merged by next allowed time
-- (ties alternate between the classes, starting at random), and a host in
-- both is checked again before its second class is taken, since slots and
-- next time are the host's. Without it rready is never read.
--
-- aopic: when the lambda page holds at least C.LAMBDA_MIN cash, it is
-- first given back in equal shares to the best URL of each of the first 64
-- ready hosts (static, then render).
local function claim_tasks(slave, maxn, render, now, out)
  local lease_ms = C.LEASE_MS
  CALL.now = now
  -- now and maxn as the commands' arguments (nstr)
  local now_s, maxn_s = nstr(now), nstr(maxn)

  -- retries that are due go back to their queues (none in a quiet call
  -- that added none)
  local due = {}
  if CALL.retry_added or not FRESH.quiet() then due = redis.call('ZRANGEBYSCORE', K_RETRY, '-inf', now_s, 'LIMIT', '0', '256') end
  for _, m in ipairs(due) do
    redis.call('ZREM', K_RETRY, m)
    local host, prio, task = string.match(m, '^([^\t]*)\t([^\t]*)\t(.*)$')
    -- a member no function wrote (a slave's raw ZADD) is dropped
    if host and tonum(prio) and task_url(task) then push(host, prio, task, false) else stat('refused', 1) end
  end
  --[[mark:k_retries]]

  -- idle hosts whose next time has passed lose their politeness fields
  -- (ready_host), 64 a claim
  local cooled = {}
  if not FRESH.quiet() then cooled = redis.call('ZRANGEBYSCORE', K.COOL, '-inf', now_s, 'LIMIT', '0', '64') end
  if #cooled > 0 then
    redis.call('ZREM', K.COOL, unpack(cooled))
    for _, h in ipairs(cooled) do
      if host_infl(h) == 0 and host_next(h) <= now and not queued(false, h) and not queued(true, h) then FRESH.drop_idle(h) end
    end
  end

  -- paused crawl, draining slave: no lease; look again in a second
  local ctl = {}
  if not FRESH.rare() then ctl = redis.call('HMGET', K.CONTROL, 'paused', 'drain:' .. slave) end
  if ctl[1] or ctl[2] then
    finish()
    out[#out + 1] = 1000
    out[#out + 1] = redis.call('HGET', K.RULES, 'version') or ''
    return out
  end

  --[[mark:k_control]]
  -- the retries' ready-set changes, before the ready sets are read
  flush_ready()

  if AOPIC then
    local lam = tonumber(redis.call('HGET', K_META, 'aopic_lambda') or '0')
    if lam > 0 and lam >= C.LAMBDA_MIN then
      local tops = {}
      for _, r in ipairs(CLASSES) do
        for _, h in ipairs(redis.call('ZRANGE', kq_ready(r), 0, 63 - #tops)) do
          local top = redis.call('ZRANGE', kq_pq(r, h), 0, 0)
          if #top > 0 then tops[#tops + 1] = {kq_pq(r, h), top[1]} end
        end
        if #tops >= 64 then break end
      end
      if #tops > 0 then
        local share = lam / #tops
        for _, t in ipairs(tops) do redis.call('ZINCRBY', t[1], -share, t[2]) end
        redis.call('HINCRBYFLOAT', K_META, 'aopic_lambda', -lam)
      end
    end
  end

  -- candidates: {host, render class}, by next allowed time
  local cands = {}
  local st = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_s, 'WITHSCORES', 'LIMIT', '0', maxn_s)
  for k = 1, #st, 2 do ready_seen(false, st[k], st[k + 1]) end
  if render then
    local rt = redis.call('ZRANGEBYSCORE', K_RREADY, '-inf', now_s, 'WITHSCORES', 'LIMIT', '0', maxn_s)
    for k = 1, #rt, 2 do ready_seen(true, rt[k], rt[k + 1]) end
    local i, j = 1, 1
    local flip = math.random() < 0.5
    while i <= #st or j <= #rt do
      local static
      if i > #st then
        static = false
      elseif j > #rt then
        static = true
      else
        local a, b = tonumber(st[i + 1]), tonumber(rt[j + 1])
        if a ~= b then
          static = a < b
        else
          static = flip
          flip = not flip
        end
      end
      if static then
        cands[#cands + 1] = {st[i], false}
        i = i + 2
      else
        cands[#cands + 1] = {rt[j], true}
        j = j + 2
      end
    end
  else
    for k = 1, #st, 2 do cands[#cands + 1] = {st[k], false} end
  end
  -- the fresh hosts (bfs, dfs), claimable at once and never fetched
  -- lately: taken in turn with the ready hosts, a fresh one first, so
  -- neither starves the other
  if not PQ then
    flush_hash(K_FRESH)
    local fresh = FRESH.scan(maxn)
    if #fresh > 0 then
      local merged = {}
      for k = 1, math.max(#cands, #fresh) do
        if fresh[k] then merged[#merged + 1] = {fresh[k][1], false, true} end
        if cands[k] then merged[#merged + 1] = cands[k] end
      end
      cands = merged
    end
  end
  -- the candidates' politeness fields, one HMGET per hash
  do
    local hosts = {}
    for k, c in ipairs(cands) do hosts[k] = c[1] end
    prefetch(hosts)
  end
  --[[mark:k_candidates]]

  local n = 0
  -- the leases' lease and leasedata entries, written at the end in one ZADD
  -- and one HSET: nothing in this call reads them
  -- (after LEASE_PAD's entry, a member and field no URL can be, a tab and
  -- 64 more bytes: see the write below; one literal, a constant of the
  -- function, where a concatenation would run on every claim)
  local LEASE_PAD = '\t----------------------------------------------------------------'
  local lease_z, lease_h = {'+inf', LEASE_PAD}, {LEASE_PAD, ''}
  -- the lease deadline and the lease data's prefix are the same for every
  -- lease of this claim: formatted once, not once per lease
  local deadline_s = string.format('%d', now + lease_ms)
  local lease_pre = slave .. '\t'
  local lease_mid = '\t' .. string.format('%d', now) .. '\t'
  -- leaseseq: the claim's tokens are reserved at its first lease, maxn
  -- of them in one HINCRBY; those it does not use are never given (a
  -- token is unique, not dense)
  local seq
  -- the leases' validators: their slots in out (at) and URLs (url), for
  -- the val hash (recrawl.go)
  local vals = {at = {}, url = {}}
  for _, c in ipairs(cands) do
    if n >= maxn then break end
    local host, r = c[1], c[2]
    local ok = true
    if c[3] then
      -- a fresh host: its task still there (not moved by a push of this
      -- call) and the host free
      ok = hget(K_FRESH, host) and host_infl(host) < host_conc(host) and host_next(host) <= now
    elseif render then
      -- the host's other class may have used its slots or moved its time
      local sc = ready_zscore(r, host)
      ok = sc ~= false and sc <= now
    end
    if ok then
      local conc = host_conc(host)
      local infl = host_infl(host)
      local hd = host_delay(host)
      local take = 1
      if hd == 0 then take = conc - infl end
      take = math.min(take, maxn - n, conc - infl)
      local fresh_first = c[3]
      while take > 0 do
        -- got: the tasks taken from one queue, all of priority prio
        local prio, got
        if fresh_first then
          -- its first task; the rest go to the host's own queue (where
          -- the next turn of this loop finds them), and its page count is
          -- written now (admit)
          fresh_first = false
          local v = hget(K_FRESH, host)
          local list = v and FRESH.decode(host, v)
          hdel(K_FRESH, host)
          has_queue[false][host] = false
          if MAX_HOST_PAGES > 0 and not hget(K_HPAGES, host) then hset(K_HPAGES, host, list and #list or 1) end
          if list then
            prio, got = list[1][1], {list[1][2]}
            for e = 2, #list do push_queue(false, host, list[e][1], list[e][2], false) end
          else
            prio, got = '0', {''}
          end
          if not list or #list == 1 then take = 1 end
        elseif PQ then
          local top = redis.call('ZPOPMIN', kq_pq(r, host))
          forget_queue(r, host)
          if #top == 0 then break end
          prio = top[2]
          got = {(redis.call('HGET', K_PQDATA, top[1]) or '0\t0\t0') .. '\t' .. top[1]}
          redis.call('HDEL', K_PQDATA, top[1])
        else
          -- up to take tasks of the best priority in one LPOP; the
          -- priority leaves prios when its list is emptied, and only then
          -- is the host's queue asked about again (queued)
          local pk = kq_prios(r, host)
          local pr = redis.call('ZRANGE', pk, '0', '0')
          if #pr == 0 then
            forget_queue(r, host)
            break
          end
          prio = pr[1]
          local q = kq_queue(r, host, prio)
          got = redis.call('LPOP', q, nstr(take)) or {}
          if #got < take or redis.call('LLEN', q) == 0 then
            redis.call('ZREM', pk, prio)
            forget_queue(r, host)
          else
            has_queue[r][host] = true
          end
          if #got == 0 then take = 0 end
        end
        --[[mark:k_pop]]
        for _, task in ipairs(got) do
          local url = task_url(task)
          if not url then
            -- a task no function queued (a slave's raw push, never
            -- counted in queued): dropped
            stat('refused', 1)
          else
            stat('queued', -1)
            if r then stat('rqueued', -1) end
            if seq then
              seq = seq + 1
            else
              seq = redis.call('HINCRBY', K_META, 'leaseseq', maxn_s) - maxn + 1
            end
            local token = seq
            infl = hincr(K_HINFL, host, 1)
            lease_z[#lease_z + 1] = deadline_s
            lease_z[#lease_z + 1] = url
            lease_h[#lease_h + 1] = url
            lease_h[#lease_h + 1] = lease_pre .. string.format('%d', token) .. lease_mid .. host .. '\t' .. prio .. '\t' .. task
            local o = #out
            out[o + 1], out[o + 2], out[o + 3], out[o + 4] = host, prio, task, token
            out[o + 5], out[o + 6], out[o + 7] = now, now + lease_ms, ''
            vals.at[#vals.at + 1] = o + 7
            vals.url[#vals.url + 1] = url
            n = n + 1
          end
          take = take - 1
        end
        --[[mark:k_lease_each]]
      end
      local nxt = now
      if hd > 0 then nxt = after(now, jittered(hd, host_jitter(host))) end
      if nxt > host_next(host) then hset(K_HNEXT, host, nxt) end
      ready_host(host)
    end
    --[[mark:k_host]]
  end
  -- a recrawl's validators for the leased URLs: one EXISTS when there are
  -- none (no recrawl queued), else HMGET and HDEL per 1000 URLs
  if n > 0 and not FRESH.rare() and redis.call('EXISTS', K.VAL) == 1 then
    for from = 1, #vals.url, 1000 do
      local to = math.min(from + 999, #vals.url)
      local vs = redis.call('HMGET', K.VAL, unpack(vals.url, from, to))
      local found = {}
      for i, v in ipairs(vs) do
        if v then
          out[vals.at[from + i - 1]] = v
          found[#found + 1] = vals.url[from + i - 1]
        end
      end
      if #found > 0 then redis.call('HDEL', K.VAL, unpack(found)) end
    end
  end
  --[[mark:k_validators]]
  if n > 0 then
    -- LEASE_PAD, longer than Redis keeps in a listpack (64 bytes by
    -- default), comes first and goes again at once: a slave's lease set
    -- and lease data of up to 128 short URLs would otherwise be listpacks,
    -- which every ZADD, HSET, HMGET, ZREM and HDEL of a lease scans whole
    -- (and a ZADD rewrites), ~10% of Redis's work per page in the
    -- functions' crawl; once a skiplist and a hashtable they stay so
    -- until emptied (Redis converts on growth only)
    local ks, kd = k_slease(slave), k_sld(slave)
    call_chunked('ZADD', ks, lease_z, 2)
    call_chunked('HSET', kd, lease_h, 2)
    redis.call('ZREM', ks, LEASE_PAD)
    redis.call('HDEL', kd, LEASE_PAD)
    -- a slave holding leases is in the registry, so the recoverer finds
    -- them even if the master retired it while it was frozen (its next
    -- heartbeat, finding no heartbeat key, records the join)
    redis.call('ZADD', K_SLAVES, 'NX', now_s, slave)
  end
  --[[mark:k_lease_write]]
  -- wait hint: ms until the earliest host is ready, -1 when none is queued;
  -- 0 for a claim that leased all it was asked for (a slave only waits
  -- after a short claim, so the hint is not looked up)
  flush_ready()
  local earliest
  if n >= maxn then
    earliest = now
  elseif not PQ then
    flush_hash(K_FRESH)
    if not (FRESH.known_empty() and not CALL.fresh_added) and redis.call('EXISTS', K_FRESH) == 1 then earliest = now end
  end
  if earliest ~= now then
    for _, r in ipairs(CLASSES) do
      if r == false or render then
        local first = redis.call('ZRANGE', kq_ready(r), '0', '0', 'WITHSCORES')
        if #first > 0 and (earliest == nil or tonumber(first[2]) < earliest) then earliest = tonumber(first[2]) end
      end
    end
    -- a retry coming due is work too (the claim then due moves it back)
    local retry = {}
    if CALL.retry_added or not FRESH.quiet() then retry = redis.call('ZRANGE', K_RETRY, '0', '0', 'WITHSCORES') end
    if #retry > 0 and (earliest == nil or tonumber(retry[2]) < earliest) then earliest = tonumber(retry[2]) end
  end
  local hint
  if earliest == nil then
    -- -2: work is queued but every host with some is at its concurrency (a
    -- lease ending frees a slot), or nothing is queued while requests are
    -- in flight (their acks bring the next links: a crawl starting or
    -- thinning out); -1: nothing queued and nothing in flight
    local nq = tonumber(redis.call('HGET', K_STATS, 'queued') or '0') + (stat_delta['queued'] or 0)
    if nq > 0 or redis.call('EXISTS', K_HINFL) == 1 then hint = -2 else hint = -1 end
  else
    hint = math.max(0, earliest - now)
  end
  out[#out + 1] = hint
  -- a slave that got fewer tasks than it asked for waits: until the hint's
  -- time at most, else for an announcement (wake_waiters)
  if n < maxn and hint ~= 0 then mark_waiting(now, hint) end
  out[#out + 1] = redis.call('HGET', K.RULES, 'version') or ''
  --[[mark:k_hint]]
  finish()
  return out
end

-- held_cap caps a claim of maxn leases at what keeps the slave within
-- max_held leases on this shard (0: LIMITS.held alone; the work API's
-- limit on what one slave's token may hold) and LIMITS.held: what
-- lose_all reads of a slave's leases in one call
local function held_cap(slave, maxn, max_held)
  local cap = LIMITS.held
  if max_held > 0 then cap = math.min(cap, max_held) end
  return math.min(maxn, cap - redis.call('ZCARD', k_slease(slave)))
end

-- at_cap appends to out a claim's result when the slave holds all it may:
-- no lease, and the busy hint (a lease it ends frees room)
local function at_cap(out)
  finish()
  out[#out + 1] = -2
  out[#out + 1] = redis.call('HGET', K.RULES, 'version') or ''
  return out
end

-- claim: lease up to max tasks for a slave (claim_tasks).
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, max (1 to LIMITS.claim), seed (math.randomseed),
-- render (0 or 1: the slave can render; it gets render tasks too),
-- max_held (the most leases the slave may hold on this shard once the
-- claim is done; 0: no cap).
-- Returns: a flat array, 7 entries per lease:
--
--   host, prio, task, token, leased_at_ms, deadline_ms, validators
--
-- (validators: what a recrawl stored for the URL in the val hash, taken
-- from it, '' for none: recrawl.go; prio is the pq score, -importance,
-- with the priority and aopic strategies, whose claim pops the host's best
-- URL with ZPOPMIN; a render task's string starts with 'r'), then a wait
-- hint: 0 when the claim leased max tasks (not looked up: a slave waits
-- only after a short claim), else ms until the earliest ready host's time
-- comes, -2 when tasks are
-- queued but every host holding some is at its concurrency (a slot frees
-- when a lease ends) or when nothing is queued but requests are in flight
-- (their acks bring links), -1 when nothing is queued and nothing is in
-- flight; then the version of the published rule set ('' when none). A
-- paused crawl or a draining slave (control.go) gets no lease and a wait
-- of one second.
-- Errors: NOPERM when the caller's Redis user is not the slave's.
register('claim', function()
  arg_count(6)
  local slave = check_slave(ARGV[2])
  local maxn = int(3, 1, LIMITS.claim, 'max')
  local seed = int(4, 0, 2147483647, 'seed')
  local render = flag(5, 'render')
  local max_held = int(6, 0, 1000000, 'max_held')
  check_own(slave)
  maxn = held_cap(slave, maxn, max_held)
  if maxn <= 0 then return at_cap({}) end
  math.randomseed(seed)
  return claim_tasks(slave, maxn, render, now_ms(), {})
end, {quiet = true})
