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

-- no_lease appends to out a claim's result without a lease: the wait hint
-- wait (ms, or -2 for busy: claim's Returns) and the version of the rule
-- set (HGET of K.RULES), after the call's writes (finish). Returns out.
local function no_lease(out, wait)
  finish()
  out[#out + 1] = wait
  out[#out + 1] = redis.call('HGET', K.RULES, 'version') or ''
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
--
-- Its steps below are locals of a do block, so that their names leave the
-- chunk's 200 locals (base.lua) where it ends. What the steps that lease
-- share is the claim's state, L (new_claim).
local claim_tasks
do
  -- due_retries moves the retries that are due (the first 256 members of
  -- K_RETRY scored at most now_s, the call's time) back to their hosts'
  -- queues: ZRANGEBYSCORE, a ZREM per member, then push's writes (the
  -- queues; the ready sets and stats buffered for flush_ready and
  -- finish). A member no function wrote (a slave's raw ZADD) is dropped
  -- and counted as refused. Reads nothing in a quiet call (FRESH.quiet)
  -- that added no retry (CALL.retry_added).
  local function due_retries(now_s)
    local due = {}
    if CALL.retry_added or not FRESH.quiet() then due = redis.call('ZRANGEBYSCORE', K_RETRY, '-inf', now_s, 'LIMIT', '0', '256') end
    for _, m in ipairs(due) do
      redis.call('ZREM', K_RETRY, m)
      local host, prio, task = string.match(m, '^([^\t]*)\t([^\t]*)\t(.*)$')
      if host and tonum(prio) and task_url(task) then push(host, prio, task, false) else stat('refused', 1) end
    end
  end

  -- cool_hosts takes the first 64 hosts of K.COOL whose next allowed time
  -- (now: the call's time; now_s as a string) has passed off it
  -- (ZRANGEBYSCORE, one ZREM) and drops the politeness fields of those
  -- still idle, nothing in flight or queued in either class
  -- (FRESH.drop_idle: hnext and hdelay, in the call's cache). Reads
  -- nothing in a quiet call (FRESH.quiet).
  local function cool_hosts(now, now_s)
    if FRESH.quiet() then return end
    local cooled = redis.call('ZRANGEBYSCORE', K.COOL, '-inf', now_s, 'LIMIT', '0', '64')
    if #cooled == 0 then return end
    redis.call('ZREM', K.COOL, unpack(cooled))
    for _, h in ipairs(cooled) do
      if host_infl(h) == 0 and host_next(h) <= now and not queued(false, h) and not queued(true, h) then FRESH.drop_idle(h) end
    end
  end

  -- held_back reports whether the crawl is paused or slave is draining
  -- (K.CONTROL's paused and drain:<slave> fields, control.go): one HMGET,
  -- none when the call knows K.CONTROL missing (FRESH.rare).
  local function held_back(slave)
    if FRESH.rare() then return false end
    local ctl = redis.call('HMGET', K.CONTROL, 'paused', 'drain:' .. slave)
    return (ctl[1] or ctl[2]) ~= false
  end

  -- share_lambda (aopic) gives the lambda page's cash (meta's
  -- aopic_lambda: HGET) back, once it holds at least C.LAMBDA_MIN, in
  -- equal shares to the best URL of each of the first 64 ready hosts,
  -- static then render: a ZRANGE of each ready set and of each host's pq,
  -- a ZINCRBY per URL, then HINCRBYFLOAT of meta. Relies on the ready sets
  -- being written (flush_ready).
  local function share_lambda()
    local lam = tonumber(redis.call('HGET', K_META, 'aopic_lambda') or '0')
    if not (lam > 0 and lam >= C.LAMBDA_MIN) then return end
    local tops = {}
    for _, r in ipairs(CLASSES) do
      for _, h in ipairs(redis.call('ZRANGE', kq_ready(r), 0, 63 - #tops)) do
        local top = redis.call('ZRANGE', kq_pq(r, h), 0, 0)
        if #top > 0 then tops[#tops + 1] = {kq_pq(r, h), top[1]} end
      end
      if #tops >= 64 then break end
    end
    if #tops == 0 then return end
    local share = lam / #tops
    for _, t in ipairs(tops) do redis.call('ZINCRBY', t[1], -share, t[2]) end
    redis.call('HINCRBYFLOAT', K_META, 'aopic_lambda', -lam)
  end

  -- by_time merges the static and render ready hosts due (st, rt: replies
  -- of ZRANGEBYSCORE WITHSCORES, host then score) into candidates {host,
  -- r} by next allowed time, ties alternating between the classes from a
  -- random start (math.random, seeded by the call). Reads no Redis.
  local function by_time(st, rt)
    local cands = {}
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
    return cands
  end

  -- candidates returns the hosts a claim of maxn tries, in turn: up to
  -- maxn hosts of K_READY (and of K_RREADY with render) scored at most
  -- now_s, as {host, r} (r: the render class) by next allowed time
  -- (by_time), each score kept in the call's view of the ready sets
  -- (ready_seen); without PQ, taken in turn with up to maxn fresh hosts
  -- of K_FRESH (FRESH.scan, after its buffered writes: flush_hash), as
  -- {host, false, true}, a fresh one first, so neither starves the
  -- other. It loads the candidates' politeness fields into the call's
  -- cache (prefetch: one HMGET per hash). Relies on the ready sets being
  -- written (flush_ready).
  local function candidates(maxn, render, now_s)
    local maxn_s = nstr(maxn)
    local cands = {}
    local st = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now_s, 'WITHSCORES', 'LIMIT', '0', maxn_s)
    for k = 1, #st, 2 do ready_seen(false, st[k], st[k + 1]) end
    if render then
      local rt = redis.call('ZRANGEBYSCORE', K_RREADY, '-inf', now_s, 'WITHSCORES', 'LIMIT', '0', maxn_s)
      for k = 1, #rt, 2 do ready_seen(true, rt[k], rt[k + 1]) end
      cands = by_time(st, rt)
    else
      for k = 1, #st, 2 do cands[#cands + 1] = {st[k], false} end
    end
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
    local hosts = {}
    for k = 1, #cands do hosts[k] = cands[k][1] end
    prefetch(hosts)
    return cands
  end

  -- LEASE_PAD: a lease set member and lease data field no URL can be, a
  -- tab and 64 more bytes (write_leases says why)
  local LEASE_PAD = '\t----------------------------------------------------------------'

  -- new_claim returns the state of a claim of maxn leases for slave at
  -- now (ms) appending to out: n, the leases so far; seq, the last token
  -- given (nil before the first lease); lease_z and lease_h, the ZADD and
  -- HSET arguments of the leases' entries (write_leases), each led by
  -- LEASE_PAD's entry, then one entry per lease in lease order; base, the
  -- length of out before the leases, whose 7 fields each follow; and what
  -- every lease's entries share, formatted once. Reads no Redis.
  local function new_claim(slave, maxn, render, now, out)
    local lease_ms = C.LEASE_MS
    return {slave = slave, maxn = maxn, render = render, now = now, out = out, base = #out,
      n = 0, seq = nil, lease_z = {'+inf', LEASE_PAD}, lease_h = {LEASE_PAD, ''},
      deadline = now + lease_ms, deadline_s = string.format('%d', now + lease_ms),
      lease_pre = slave .. '\t', lease_mid = '\t' .. string.format('%d', now) .. '\t'}
  end

  -- claim_host (below) and the steps it runs, in a block of their own
  -- (base.lua's 200 locals)
  local claim_host
  do
    -- pop_fresh takes fresh host's entry off K_FRESH (hdel, in the call's
    -- cache; the host is then known to have no queue) and returns its first
    -- task as (prio, {task}) and take, made 1 when that was the entry's
    -- only task. The rest go to the host's own queue (push_queue), where
    -- claim_host's next turn finds them; the host's page count is written
    -- now (K_HPAGES, when MAX_HOST_PAGES caps them: admit). An entry that
    -- does not decode gives the task '' (refused by lease_each).
    local function pop_fresh(host, take)
      local v = hget(K_FRESH, host)
      local list = v and FRESH.decode(host, v)
      hdel(K_FRESH, host)
      has_queue[false][host] = false
      if MAX_HOST_PAGES > 0 and not hget(K_HPAGES, host) then hset(K_HPAGES, host, list and #list or 1) end
      if not list then return '0', {''}, 1 end
      for e = 2, #list do push_queue(false, host, list[e][1], list[e][2], false) end
      if #list == 1 then take = 1 end
      return list[1][1], {list[1][2]}, take
    end

    -- pop_pq (priority, aopic) takes host's best URL of class r off its pq
    -- (ZPOPMIN) with its task's fields (HGET and HDEL of K_PQDATA) and
    -- returns (prio, {task}), prio the URL's score; nil when the pq is
    -- empty. The host's queue is asked about again (forget_queue).
    local function pop_pq(r, host)
      local top = redis.call('ZPOPMIN', kq_pq(r, host))
      forget_queue(r, host)
      if #top == 0 then return nil end
      local task = (redis.call('HGET', K_PQDATA, top[1]) or '0\t0\t0') .. '\t' .. top[1]
      redis.call('HDEL', K_PQDATA, top[1])
      return top[2], {task}
    end

    -- pop_list (bfs, dfs) takes up to take tasks of the best priority of
    -- host's queues of class r (ZRANGE of its prios, one LPOP) and returns
    -- (prio, tasks, take), take 0 when none came; nil when the host has no
    -- priority left. A priority leaves prios (ZREM) when its list is
    -- emptied (LLEN when the LPOP got all it asked), and only then is the
    -- host's queue asked about again (forget_queue; else has_queue says it
    -- has one).
    local function pop_list(r, host, take)
      local pk = kq_prios(r, host)
      local pr = redis.call('ZRANGE', pk, '0', '0')
      if #pr == 0 then
        forget_queue(r, host)
        return nil
      end
      local prio = pr[1]
      local q = kq_queue(r, host, prio)
      local got = redis.call('LPOP', q, nstr(take)) or {}
      if #got < take or redis.call('LLEN', q) == 0 then
        redis.call('ZREM', pk, prio)
        forget_queue(r, host)
      else
        has_queue[r][host] = true
      end
      if #got == 0 then take = 0 end
      return prio, got, take
    end

    -- lease_each leases the tasks got, popped from host's queue of class r
    -- with priority prio, to the claim L: per task, the stats (queued, and
    -- rqueued for render: -1), a token (at the claim's first lease L.maxn
    -- tokens are reserved in one HINCRBY of meta's leaseseq; those unused
    -- are never given: a token is unique, not dense), the host's slot
    -- (K_HINFL + 1, in the call's cache), the lease's entries in L.lease_z
    -- and L.lease_h and its 7 fields in L.out (validators '' until
    -- take_validators). A task no function queued (a slave's raw push,
    -- never counted in queued) is dropped and counted as refused. Returns
    -- take less the tasks got.
    local function lease_each(L, host, r, prio, got, take)
      local out, lz, lh, pre, mid = L.out, L.lease_z, L.lease_h, L.lease_pre, L.lease_mid
      local n, seq, now, deadline, deadline_s = L.n, L.seq, L.now, L.deadline, L.deadline_s
      for k = 1, #got do
        local task = got[k]
        local url = task_url(task)
        if not url then
          stat('refused', 1)
        else
          stat('queued', -1)
          if r then stat('rqueued', -1) end
          if seq then
            seq = seq + 1
          else
            seq = redis.call('HINCRBY', K_META, 'leaseseq', nstr(L.maxn)) - L.maxn + 1
          end
          hincr(K_HINFL, host, 1)
          lz[#lz + 1] = deadline_s
          lz[#lz + 1] = url
          lh[#lh + 1] = url
          lh[#lh + 1] = pre .. string.format('%d', seq) .. mid .. host .. '\t' .. prio .. '\t' .. task
          local o = #out
          out[o + 1], out[o + 2], out[o + 3], out[o + 4] = host, prio, task, seq
          out[o + 5], out[o + 6], out[o + 7] = now, deadline, ''
          n = n + 1
        end
        take = take - 1
      end
      L.n, L.seq = n, seq
      return take
    end

    -- claim_host leases what the claim L may take of the candidate c
    -- ({host, r, fresh}: candidates). Nothing unless the host can still be
    -- claimed: a fresh host's entry is still in K_FRESH (not moved by a
    -- push of this call) and the host free and due; with render, the
    -- host's score in its ready set (ready_zscore), which its other class
    -- may have moved, still due. Else it takes one task (all free slots
    -- when the host's delay is 0; at most what L still wants) a turn,
    -- popped (pop_fresh first for a fresh host, else pop_pq or pop_list) and
    -- leased (lease_each), then sets the host's next allowed time to now +
    -- its jittered delay (K_HNEXT, in the call's cache) and its place in
    -- the ready sets (ready_host). Reads the host's politeness fields
    -- through the call's cache (prefetched by candidates).
    function claim_host(L, c)
      local host, r, now = c[1], c[2], L.now
      if c[3] then
        if not (hget(K_FRESH, host) and host_infl(host) < host_conc(host) and host_next(host) <= now) then return end
      elseif L.render then
        local sc = ready_zscore(r, host)
        if not (sc ~= false and sc <= now) then return end
      end
      local conc = host_conc(host)
      local infl = host_infl(host)
      local hd = host_delay(host)
      local take = 1
      if hd == 0 then take = conc - infl end
      take = math.min(take, L.maxn - L.n, conc - infl)
      local fresh = c[3]
      while take > 0 do
        local prio, got
        if fresh then
          fresh = false
          prio, got, take = pop_fresh(host, take)
        elseif PQ then
          prio, got = pop_pq(r, host)
        else
          prio, got, take = pop_list(r, host, take)
        end
        if not prio then break end
        --[[mark:k_pop]]
        take = lease_each(L, host, r, prio, got, take)
        --[[mark:k_lease_each]]
      end
      local nxt = now
      if hd > 0 then nxt = after(now, jittered(hd, host_jitter(host))) end
      if nxt > host_next(host) then hset(K_HNEXT, host, nxt) end
      ready_host(host)
    end
  end

  -- take_validators gives the claim L's leases what a recrawl stored for
  -- their URLs in K.VAL (recrawl.go), as their 7th field in L.out, and
  -- deletes it there: one EXISTS when the call does not know K.VAL
  -- missing (FRESH.rare), and when it exists HMGET and HDEL per 1000
  -- URLs. Relies on L.lease_h and L.out holding the leases in one order
  -- (new_claim).
  local function take_validators(L)
    if L.n == 0 or FRESH.rare() or redis.call('EXISTS', K.VAL) == 0 then return end
    local urls, out, base = {}, L.out, L.base
    for k = 1, L.n do urls[k] = L.lease_h[2 * k + 1] end
    for from = 1, #urls, 1000 do
      local to = math.min(from + 999, #urls)
      local vs = redis.call('HMGET', K.VAL, unpack(urls, from, to))
      local found = {}
      for i, v in ipairs(vs) do
        if v then
          out[base + 7 * (from + i - 1)] = v
          found[#found + 1] = urls[from + i - 1]
        end
      end
      if #found > 0 then redis.call('HDEL', K.VAL, unpack(found)) end
    end
  end

  -- write_leases writes the claim L's leases, at least one: their entries
  -- in the slave's lease set (k_slease: ZADD of deadline, URL) and lease
  -- data (k_sld: HSET of URL, data), in chunks (call_chunked), and puts
  -- the slave in the registry (K_SLAVES: ZADD NX at now), so the
  -- recoverer finds the leases even if the master retired the slave while
  -- it was frozen (its next heartbeat, finding no heartbeat key, records
  -- the join). Nothing in the claim reads these keys before.
  --
  -- LEASE_PAD's entry, longer than Redis keeps in a listpack (64 bytes by
  -- default), comes first and goes again at once (ZREM, HDEL): a slave's
  -- lease set and lease data of up to 128 short URLs would otherwise be
  -- listpacks, which every ZADD, HSET, HMGET, ZREM and HDEL of a lease
  -- scans whole (and a ZADD rewrites), ~10% of Redis's work per page in
  -- the functions' crawl; once a skiplist and a hashtable they stay so
  -- until emptied (Redis converts on growth only).
  local function write_leases(L)
    local ks, kd = k_slease(L.slave), k_sld(L.slave)
    call_chunked('ZADD', ks, L.lease_z, 2)
    call_chunked('HSET', kd, L.lease_h, 2)
    redis.call('ZREM', ks, LEASE_PAD)
    redis.call('HDEL', kd, LEASE_PAD)
    redis.call('ZADD', K_SLAVES, 'NX', nstr(L.now), L.slave)
  end

  -- wait_hint returns the claim L's wait hint (claim's Returns), after
  -- writing the ready sets (flush_ready): 0 when it leased all it was
  -- asked for (a slave only waits after a short claim, so nothing is
  -- looked up) or a fresh host is left (EXISTS of K_FRESH, after its
  -- buffered writes, unless the call knows it empty); else ms until the
  -- earliest time of the first host of each ready set the slave claims
  -- from (ZRANGE of K_READY, and K_RREADY with render) and of the first
  -- retry (ZRANGE of K_RETRY, not read in a quiet call that added none: a
  -- retry coming due is work too). Without any: -2 when work is queued
  -- (meta's queued stat, HGET, with the call's delta) but every host
  -- with some is at its concurrency, or nothing is queued while requests
  -- are in flight (EXISTS of K_HINFL: their acks bring the next links);
  -- -1 when nothing is queued and nothing is in flight.
  local function wait_hint(L)
    flush_ready()
    local now, earliest = L.now, nil
    if L.n >= L.maxn then
      return 0
    elseif not PQ then
      flush_hash(K_FRESH)
      if not (FRESH.known_empty() and not CALL.fresh_added) and redis.call('EXISTS', K_FRESH) == 1 then return 0 end
    end
    for _, r in ipairs(CLASSES) do
      if r == false or L.render then
        local first = redis.call('ZRANGE', kq_ready(r), '0', '0', 'WITHSCORES')
        if #first > 0 and (earliest == nil or tonumber(first[2]) < earliest) then earliest = tonumber(first[2]) end
      end
    end
    local retry = {}
    if CALL.retry_added or not FRESH.quiet() then retry = redis.call('ZRANGE', K_RETRY, '0', '0', 'WITHSCORES') end
    if #retry > 0 and (earliest == nil or tonumber(retry[2]) < earliest) then earliest = tonumber(retry[2]) end
    if earliest then return math.max(0, earliest - now) end
    local nq = tonumber(redis.call('HGET', K_STATS, 'queued') or '0') + (stat_delta['queued'] or 0)
    if nq > 0 or redis.call('EXISTS', K_HINFL) == 1 then return -2 end
    return -1
  end

  -- claim_tasks (the chunk local above) runs the steps in their order
  function claim_tasks(slave, maxn, render, now, out)
    CALL.now = now
    local now_s = nstr(now)
    due_retries(now_s)
    --[[mark:k_retries]]
    cool_hosts(now, now_s)
    -- paused crawl, draining slave: no lease; look again in a second
    if held_back(slave) then return no_lease(out, 1000) end
    --[[mark:k_control]]
    -- the retries' ready-set changes, before the ready sets are read
    flush_ready()
    if AOPIC then share_lambda() end
    local cands = candidates(maxn, render, now_s)
    --[[mark:k_candidates]]
    local L = new_claim(slave, maxn, render, now, out)
    for k = 1, #cands do
      if L.n >= maxn then break end
      claim_host(L, cands[k])
      --[[mark:k_host]]
    end
    take_validators(L)
    --[[mark:k_validators]]
    if L.n > 0 then write_leases(L) end
    --[[mark:k_lease_write]]
    local hint = wait_hint(L)
    out[#out + 1] = hint
    -- a slave that got fewer tasks than it asked for waits: until the
    -- hint's time at most, else for an announcement (wake_waiters)
    if L.n < maxn and hint ~= 0 then mark_waiting(now, hint) end
    out[#out + 1] = redis.call('HGET', K.RULES, 'version') or ''
    --[[mark:k_hint]]
    finish()
    return out
  end
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
  -- at the cap: no lease, and the busy hint (a lease it ends frees room)
  if maxn <= 0 then return no_lease({}, -2) end
  math.randomseed(seed)
  return claim_tasks(slave, maxn, render, now_ms(), {})
end, {quiet = true})
