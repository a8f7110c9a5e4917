-- cache.lua: a call's caches of what it reads, and what it writes at its
-- end. A call runs atomically, so what it read stays true until it writes;
-- every write to a cached structure goes through the helpers below, which
-- keep the cache equal to what Redis will hold. They cut the commands a
-- call runs per page (BenchmarkScriptCommands).
--
-- Writes to the per-host hashes and the ready sets are write-behind: they
-- change the cache at once and reach Redis at the end of the call
-- (finish), one HSET/HDEL per hash and one ZADD/ZREM per ready set, so a
-- batch of pages costs a few calls rather than a few per page. Nothing in a
-- call reads those structures from Redis after writing them except
-- through the cache; the claim flushes the ready sets (flush_ready) before
-- it reads a range of them.

-- write_back writes a write-behind cache's changes to key: the hosts
-- (in order) whose value in vals is false are removed with rem_cmd, the
-- others set with set_cmd, as host, value pairs or, score_first, as
-- value, host (ZADD)
local function write_back(key, hosts, vals, set_cmd, rem_cmd, score_first)
  local sets, rems = {}, {}
  for _, h in ipairs(hosts) do
    local v = vals[h]
    if not v then
      rems[#rems + 1] = h
    elseif score_first then
      sets[#sets + 1] = nstr(v)
      sets[#sets + 1] = h
    else
      sets[#sets + 1] = h
      sets[#sets + 1] = nstr(v)
    end
  end
  call_chunked(set_cmd, key, sets, 2)
  call_chunked(rem_cmd, key, rems, 1)
end

-- hcache[key][host]: a host's field of the per-host hashes (politeness:
-- hinfl, hnext, hdelay, hpdelay, hjitter, hconc; the fresh hash; the page
-- counts, hpages), false when absent: read at most
-- once per call (hget, prefetch), written through the cache (hset, hdel,
-- hincr) and to Redis by flush_hashes. hdirty[key]: the hosts whose field
-- this call changed, in order.
local function hcache_of(key)
  local t = hcache[key]
  if not t then
    t = {}
    hcache[key] = t
  end
  return t
end
-- FRESH.quiet reports whether none of K.quiet's keys existed when the
-- call first asked (a claim, a completion: register's opts.quiet; false
-- for the other functions, which ask nothing): one EXISTS then stands for
-- the calls' looks at each (the policy hashes, the fresh hash, the render
-- ready set; the retries, idle hosts, controls and validators a claim
-- reads; the slaves' delays). A call writes those keys through its caches
-- (which then answer for what it wrote), at its end (hcool: finish), or
-- not at all, except the retries a completion adds (CALL.retry_added).
-- A slave's Redis user needs the selector for that EXISTS (ACLRules); one
-- made by an earlier bin/master acl has none, and its calls ask about
-- each key as they did (acl_check_cmd: a refused redis.call would fill
-- the ACL log).
--
-- A broad crawl is seldom quiet: its fresh hosts, idle hosts and retries
-- exist while the rest (K.rare: the policies, the slaves' delays, the
-- render ready set, the validators, the controls) do not. FRESH.rare
-- answers for those with one EXISTS of their own, so such a call skips
-- its looks at each (an EXISTS of the policies, HMGETs of the slaves'
-- delays, an EXISTS of rready and of the validators, an HMGET of the
-- controls). Which EXISTS a call asks follows the crawl's recent calls
-- (K.hint, kept with the key names): after a call found the crawl busy
-- and no rare key, the next HINT_CALLS calls ask about the rare keys
-- only; after one found a rare key, they ask about neither and look at
-- each key. A hint only picks the question: every answer is the call's
-- own.
local HINT_CALLS = 64
local function exists_none(keys)
  return redis.acl_check_cmd('EXISTS', unpack(keys)) and redis.call('EXISTS', unpack(keys)) == 0
end
function FRESH.quiet()
  local q = CALL.quiet
  if q == 'ask' then
    local hint = K.hint
    if hint.left > 0 then
      hint.left = hint.left - 1
      q = false
    else
      q = exists_none(K.quiet)
      -- a call that found the crawl busy sets the hint (FRESH.rare)
      CALL.hint_from = not q
    end
    CALL.quiet = q
  end
  return q == true
end
-- FRESH.rare reports whether none of K.rare's keys existed when the call
-- first asked: true in a quiet call, false in a function that asks
-- nothing (FRESH.quiet) or while the hint says a rare key exists
function FRESH.rare()
  local r = CALL.rare
  if r ~= nil then return r end
  if CALL.quiet == nil then
    r = false
  elseif FRESH.quiet() then
    r = true
  else
    local hint = K.hint
    if hint.left > 0 and hint.rare_found and not CALL.hint_from then
      r = false
    else
      r = exists_none(K.rare)
      if CALL.hint_from then
        hint.rare_found, hint.left = not r, HINT_CALLS
      end
    end
  end
  CALL.rare = r
  return r
end
-- the policy hashes are empty in most crawls: one EXISTS per call tells,
-- and then their fields are known absent until this call writes them
local function policies_known_empty()
  if policies_empty == nil then
    policies_empty = FRESH.rare() or redis.call('EXISTS', K_HPDELAY, K_HJITTER, K_HCONC) == 0
  end
  return policies_empty
end
-- the fresh hash is empty in a crawl of few hosts: one EXISTS per call
-- tells, and then a host not written by this call has no field in it
function FRESH.known_empty()
  if CALL.fresh_empty == nil then CALL.fresh_empty = FRESH.quiet() or redis.call('EXISTS', K_FRESH) == 0 end
  return CALL.fresh_empty
end
local function hget(key, host)
  local t = hcache[key]
  local v
  if t then
    v = t[host]
    if v ~= nil then return v end
  else
    t = {}
    hcache[key] = t
  end
  if (POLICY[key] and policies_known_empty()) or (key == K_FRESH and FRESH.known_empty()) or
    (key == K_HDELAY and FRESH.rare()) then
    v = false
  else
    v = redis.call('HGET', key, host) or false
    -- a field of a hash of numbers that is not one (no function wrote
    -- it) counts as absent
    if v and K.numeric[key] then v = tonum(v) or false end
  end
  t[host] = v
  return v
end
-- prefetch reads the politeness fields of hosts (a list, repeats allowed)
-- that are not cached yet: one HMGET per hash instead of one HGET per host
local function prefetch(hosts)
  local keys = {K_HINFL, K_HNEXT}
  -- the slaves' delays and the policies: none when the call is quiet
  if not FRESH.rare() then keys[3] = K_HDELAY end
  if not policies_known_empty() then
    keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = K_HPDELAY, K_HJITTER, K_HCONC
  end
  -- the hosts not cached in the first hash (hinfl): the fields are read
  -- together, so a host cached in one is cached in all but where a call
  -- read one field alone (hget), and its other fields come by HGET then
  local t1 = hcache_of(keys[1])
  local want, seen = {}, {}
  for _, h in ipairs(hosts) do
    if t1[h] == nil and not seen[h] then
      seen[h] = true
      want[#want + 1] = h
    end
  end
  if #want == 0 then return end
  for _, key in ipairs(keys) do
    local t = hcache_of(key)
    -- the politeness hashes hold numbers (hget); a field this call
    -- already holds (it may have written it) is kept
    for k, v in ipairs(hmget(key, want)) do
      local h = want[k]
      if t[h] == nil then t[h] = v and (tonum(v) or false) end
    end
  end
end
-- hmark marks host's field of key changed (hdirty); hset, hdel and hincr
-- write the cache and mark it. The hottest helpers of a call: they do
-- their table work inline rather than through hcache_of.
local function hmark(key, host)
  local d = hdirty[key]
  if not d then
    d = {list = {}, set = {}}
    hdirty[key] = d
    hdirty_keys[#hdirty_keys + 1] = key
  end
  local set = d.set
  if not set[host] then
    set[host] = true
    local list = d.list
    list[#list + 1] = host
  end
end
local function hset(key, host, v)
  local t = hcache[key]
  if not t then
    t = {}
    hcache[key] = t
  end
  t[host] = v
  hmark(key, host)
end
local function hdel(key, host) hset(key, host, false) end
local function hincr(key, host, d)
  local v = (hget(key, host) or 0) + d
  hcache[key][host] = v
  hmark(key, host)
  return v
end
-- flush_hash writes the changed fields of one hash now (the fresh hash,
-- before a claim reads a range of it)
local function flush_hash(key)
  local d = hdirty[key]
  if d and #d.list > 0 then
    write_back(key, d.list, hcache[key], 'HSET', 'HDEL', false)
    d.list, d.set = {}, {}
  end
end
-- flush_hashes writes the changed fields: one HSET and one HDEL per hash
local function flush_hashes()
  for _, key in ipairs(hdirty_keys) do
    write_back(key, hdirty[key].list, hcache[key], 'HSET', 'HDEL', false)
  end
  hdirty, hdirty_keys = {}, {}
end

-- stats: the call's changes to the stats hash, written once per field at
-- its end (flush_stats, from finish): nothing in a call reads them
local function stat(field, d)
  local delta = stat_delta
  if delta[field] == nil then
    delta[field] = 0
    stat_order[#stat_order + 1] = field
  end
  delta[field] = delta[field] + d
end
local function flush_stats()
  for _, field in ipairs(stat_order) do
    redis.call('HINCRBY', K_STATS, field, nstr(stat_delta[field]))
  end
  stat_delta, stat_order = {}, {}
end

-- in_ready[r][host]: the host's score in the ready set of its class (r:
-- render), false when not in it; nil until this call read or wrote it.
-- Writes are write-behind (rdirty, flush_ready). rready_empty: the
-- render ready set was empty when first asked, so a host not written since
-- is not in it (most crawls never render).
local function ready_score(r, host)
  local v = in_ready[r][host]
  if v == nil and r then
    if rready_empty == nil then rready_empty = FRESH.rare() or redis.call('EXISTS', K_RREADY) == 0 end
    if rready_empty then v = false end
  end
  return v
end
-- ready_set sets host's score in the ready set of class r (false: out of
-- it) in the cache and marks it for flush_ready; the class's dirty list
-- is made at its first write
local function ready_set(r, host, score)
  in_ready[r][host] = score
  local d = rdirty[r]
  if not d then
    d = {list = {}, set = {}}
    rdirty[r] = d
  end
  if not d.set[host] then
    d.set[host] = true
    d.list[#d.list + 1] = host
  end
end
local function ready_add(r, host, score)
  local cur = ready_score(r, host)
  if cur ~= score then
    if not cur then readied[#readied + 1] = {r, host} end
    ready_set(r, host, score)
  end
end
local function ready_rem(r, host)
  if ready_score(r, host) ~= false then ready_set(r, host, false) end
end
-- flush_ready writes the ready sets' changes: one ZADD and one ZREM per set
local function flush_ready()
  for _, r in ipairs(CLASSES) do
    local d = rdirty[r]
    if d then
      write_back(kq_ready(r), d.list, in_ready[r], 'ZADD', 'ZREM', true)
      rdirty[r] = nil
    end
  end
end
-- ready_zscore returns host's score in the ready set of class r, false
-- when it is not in it
local function ready_zscore(r, host)
  local v = ready_score(r, host)
  if v == nil then
    local sc = redis.call('ZSCORE', kq_ready(r), host)
    if sc then v = tonumber(sc) else v = false end
    in_ready[r][host] = v
  end
  return v
end
-- ready_seen records a score a call read from the ready set of class r
local function ready_seen(r, host, score) in_ready[r][host] = tonumber(score) end
-- in_ready_set reports whether host is in the ready set of class r
local function in_ready_set(r, host) return ready_zscore(r, host) ~= false end

-- has_queue[r][host]: whether the host has queued tasks of class r; push
-- sets it, a claim's pop forgets it (nil: ask Redis). no_render: no
-- render task was queued when first asked (the stats' rqueued count, which
-- finish relies on too), so a host this call did not push a render task to
-- has no render queue.
local function queued(r, host)
  local v = has_queue[r][host]
  if v == nil and r then
    if no_render == nil then
      no_render = tonumber(redis.call('HGET', K_STATS, 'rqueued') or '0') <= 0
    end
    if no_render then v = false end
  end
  if v == nil or v == 'ask' then
    v = redis.call('EXISTS', kq_prios(r, host), kq_pq(r, host)) == 1
    has_queue[r][host] = v
  end
  return v
end
-- forget_queue: a claim took tasks from the host's queue of class r
local function forget_queue(r, host) has_queue[r][host] = 'ask' end

-- a host's politeness: its HostPolicy where set, else the crawl's; the
-- delay is the larger of the slaves' (hdelay: Crawl-delay, autothrottle)
-- and the policy's (hpdelay) when both are set. The cache holds these
-- hashes' fields as numbers (hget, prefetch; every write puts a number)
local function host_conc(host)
  return hget(K_HCONC, host) or DEF_CONC
end
local function host_jitter(host)
  return hget(K_HJITTER, host) or DEF_JITTER
end
local function host_delay(host)
  local d = hget(K_HDELAY, host)
  local p = hget(K_HPDELAY, host)
  if d and p then return math.max(d, p) end
  return d or p or DEF_DELAY
end
local function host_infl(host)
  return hget(K_HINFL, host) or 0
end
local function host_next(host)
  return hget(K_HNEXT, host) or 0
end

-- jittered returns the politeness delay hd with its random extra wait:
-- uniform hd × jitter × U[0,1), exponential hd × E with E of mean jitter
-- capped at 5 × jitter, or none
local function jittered(hd, jitter)
  if hd <= 0 or jitter <= 0 or JITTER_DIST == 'none' then return hd end
  local e
  if JITTER_DIST == 'exponential' then
    e = math.min(-jitter * math.log(1 - math.random()), 5 * jitter)
  else
    e = jitter * math.random()
  end
  return math.floor(hd * (1 + e))
end

-- emit buffers an event; flush_events writes a call's events in stream
-- entries of up to EVENTS_PER_ENTRY events each: one event as the fields
-- type and data, several as t0, d0, t1, d1, ... (Stream.Read splits them
-- and numbers them: eventID)
local function emit(typ, data)
  local b = ev_buf
  b[#b + 1] = typ
  b[#b + 1] = data
end
local flush_events
do
  -- the entries' field names, made once: t0, d0, t1, d1, ...
  local names = {}
  for i = 0, EVENTS_PER_ENTRY - 1 do names[2 * i + 1], names[2 * i + 2] = 't' .. i, 'd' .. i end
  flush_events = function()
    local b = ev_buf
    local n = #b / 2
    if n == 1 then
      redis.call('XADD', EV_KEY, '*', 'type', b[1], 'data', b[2])
    elseif n > 1 then
      for from = 0, n - 1, EVENTS_PER_ENTRY do
        local args = {}
        for e = from, math.min(from + EVENTS_PER_ENTRY, n) - 1 do
          local i = e - from
          args[4 * i + 1] = names[2 * i + 1]
          args[4 * i + 2] = b[2 * e + 1]
          args[4 * i + 3] = names[2 * i + 2]
          args[4 * i + 4] = b[2 * e + 2]
        end
        redis.call('XADD', EV_KEY, '*', unpack(args))
      end
    end
    ev_buf = {}
  end
end

-- Idle slaves wait for work rather than poll for it. A claim that leases
-- fewer tasks than asked marks the shard's meta wait_until: the time by
-- which its slave looks again anyway (the claim's hint; WAIT_FOREVER from
-- now when it has none), the latest of the marks. A call that makes a host
-- claimable sooner than that (a host added to a ready set with an earlier
-- score) publishes frontier.WorkMessage on the crawl's work channel
-- (Keys.WorkChannel), which every slave follows, and clears the mark, so
-- the waiting slaves claim at once; a crawl where no slave waits publishes
-- nothing, nor does a host readied after the time the waiters look again.
-- The mark costs a claim that came short an HGET and an HSET, and a call
-- that made a host claimable one HGET (none when the call read the seen
-- table's state, whose HMGET reads the mark too: LH.state).
local WAIT_FOREVER = 3600000
-- LH.wait_mark is meta's wait_until as the call knows it (false when
-- absent): read at the first look (or with the seen table's state:
-- LH.state) and kept as the call writes it, so a call reads it once
function LH.wait_mark()
  local v = CALL.wait_until
  if v == nil then
    v = redis.call('HGET', K_META, 'wait_until') or false
    CALL.wait_until = v
  end
  return v
end
local function mark_waiting(now, hint)
  local until_ms = now + WAIT_FOREVER
  if hint >= 0 then until_ms = now + hint end
  local cur = tonumber(LH.wait_mark() or '0') or 0
  if cur < until_ms then
    local s = nstr(until_ms)
    redis.call('HSET', K_META, 'wait_until', s)
    CALL.wait_until = s
  end
end
local function wake_waiters()
  local soonest
  -- a task that went to the fresh hash is claimable now
  if CALL.fresh_added then soonest = now_ms() end
  for _, rh in ipairs(readied) do
    local sc = in_ready[rh[1]][rh[2]]
    if sc and (soonest == nil or sc < soonest) then soonest = sc end
  end
  if not soonest then return end
  local mark = tonumber(LH.wait_mark() or '')
  if not mark then return end
  if mark <= now_ms() then
    -- the waiters have looked again already
    redis.call('HDEL', K_META, 'wait_until')
    CALL.wait_until = false
    return
  end
  if soonest >= mark then return end
  redis.call('HDEL', K_META, 'wait_until')
  CALL.wait_until = false
  redis.call('PUBLISH', 'crawl:{' .. CRAWL .. '}:work', WORK_MESSAGE)
end

-- finish ends every call that changes the queues: it writes the caches,
-- the stats and the events, and reopens the crawl when work was added
local function finish()
  --[[mark:finish_entry]]
  flush_hashes()
  if CALL.cool then
    call_chunked('ZADD', K.COOL, CALL.cool, 2)
    CALL.cool = nil
  end
  --[[mark:flush_hashes]]
  flush_ready()
  --[[mark:flush_ready]]
  flush_stats()
  --[[mark:flush_stats]]
  flush_events()
  --[[mark:flush_events]]
  LH.flush()
  if #readied > 0 or CALL.fresh_added then wake_waiters() end
  -- a slave adds work only while it holds a lease, and a crawl with a
  -- lease is neither idle nor finished: only the master's functions (seeds,
  -- requeues, leases taken back) reopen it
  if work_added then
    if not SLAVE then redis.call('HDEL', K.FINISH, 'idle_since', 'finished') end
    -- the work counter a sharded crawl's finish decision compares
    -- (CheckFinished in sharded_control.go)
    redis.call('HINCRBY', K_META, 'workseq', '1')
  end
  --[[mark:flush_meta]]
  --[[profile:flush]]
end
