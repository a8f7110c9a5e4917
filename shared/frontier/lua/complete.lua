-- complete.lua: acknowledging leases, with their links and events.

local OUTCOMES = {done = true, retry = true, fail = true, release = true}

-- whole returns a whole number >= 0 read from s, capped at cap; nil when s
-- is not one
local function whole(s, cap)
  local v = tonum(s)
  if not v or v < 0 or v % 1 ~= 0 then return nil end
  return math.min(v, cap)
end

-- COMPLETION: the fields of a completion before its events, policies and
-- links
local COMPLETION = 13

-- check_completions checks the n completions from ARGV[first] on (their
-- layout: the function complete's ARGV) before anything is written, and
-- returns the index after the last and their counts of events, links and
-- policies. What complete_leases reads in a form it cannot use counts as
-- nothing (a delay that is not a number is 0; a token that is not the
-- lease's loses the ack) or is capped (the delays a slave reports, at the
-- crawl's C.MAX_HOST_DELAY and C.MAX_BACKOFF).
local function check_completions(first, n)
  local j, nargs = first, #ARGV
  local nevs, nls, nps = {}, {}, {}
  for c = 1, n do
    if j + COMPLETION - 1 > nargs then fail('completion ' .. c .. ' runs past the arguments') end
    if #ARGV[j] > LIMITS.url then fail('completion ' .. c .. ': URL longer than ' .. LIMITS.url .. ' bytes') end
    if not OUTCOMES[ARGV[j + 2]] then fail('completion ' .. c .. ': unknown outcome') end
    if #ARGV[j + 6] > LIMITS.reason then fail('completion ' .. c .. ': reason longer than ' .. LIMITS.reason .. ' bytes') end
    local nhash = #ARGV[j + 7]
    if (nhash ~= 0 and nhash ~= 16) or #ARGV[j + 9] > 8 or #ARGV[j + 8] > 8 then fail('completion ' .. c .. ': malformed content hash') end
    local nev, nlinks, npol = tonum(ARGV[j + 10]), tonum(ARGV[j + 11]), tonum(ARGV[j + 12])
    if not (nev and nlinks and npol and nev >= 0 and nlinks >= 0 and npol >= 0 and nev <= LIMITS.events and
      nlinks <= LIMITS.links and npol <= LIMITS.policies and (nev + nlinks + npol) % 1 == 0 and nev % 1 == 0 and nlinks % 1 == 0) then
      fail('completion ' .. c .. ': counts must be whole numbers, at most ' .. LIMITS.events .. ' events, ' ..
        LIMITS.links .. ' links and ' .. LIMITS.policies .. ' policies')
    end
    nevs[c], nls[c], nps[c] = nev, nlinks, npol
    local ev_at = j + COMPLETION
    if ev_at + 2 * nev - 1 > nargs then fail('completion ' .. c .. ': events run past the arguments') end
    for e = ev_at, ev_at + 2 * nev - 2, 2 do
      if not EVENT_TYPES[ARGV[e]] then fail('completion ' .. c .. ': unknown event type') end
      if #ARGV[e + 1] > LIMITS.event then fail('completion ' .. c .. ': event longer than ' .. LIMITS.event .. ' bytes') end
    end
    if npol > 0 then check_policies(ev_at + 2 * nev, npol) end
    j = ev_at + 2 * nev + 4 * npol + TUPLE * nlinks
    if j - 1 > nargs then fail('completion ' .. c .. ': links run past the arguments') end
  end
  return j, {ev = nevs, links = nls, pol = nps}
end

-- complete_leases acknowledges the n completions from ARGV[5] on (checked:
-- counts are check_completions') for slave. For each it checks the lease
-- is still held by this slave with this token (a lost lease cannot be
-- acked: nothing of it is applied), ends the lease, frees the host's slot
-- and sets its next allowed time, applies the outcome, buffers the events
-- and enqueues the links that were never seen. It returns the acks and the
-- number of links enqueued; nothing is flushed yet (finish).
--
-- A done page with a content hash is first looked up in the content
-- buckets: when another URL had that content, the page is a duplicate, its
-- links are not enqueued and a duplicate event names the first URL. A new
-- link over a trap cap (host pages, query variants) is dropped and counted.
-- With the priority strategy a link to a URL that is still queued adds X to
-- its importance; with aopic the page's cash (its lease prio) is split:
-- the tax to lambda, the rest equally among its new and still-queued links.
--
-- A held completion's host policies are applied first, before anything is
-- requeued or enqueued, writing only what changes (set_policy). A render
-- task (its task string's flag) goes back to its host's render queues on
-- retry and release; links keep their own flag.
--
-- Its steps below are locals of a do block, so that their names leave the
-- chunk's 200 locals (base.lua) where it ends. What they share is the
-- call's state, S (complete_leases).
local complete_leases
do
  -- read_leases returns the lease of each of the n completions, from
  -- ARGV[5] on: lease_fields of its URL's entry in slave's lease data
  -- (k_sld: one HMGET, hmget), false for a URL without one. It loads the
  -- leased hosts' politeness fields into the call's cache (prefetch: one
  -- HMGET per hash).
  local function read_leases(slave, n, counts)
    local urls, i = {}, 5
    for c = 1, n do
      urls[c] = ARGV[i]
      i = i + COMPLETION + 2 * counts.ev[c] + 4 * counts.pol[c] + TUPLE * counts.links[c]
    end
    --[[mark:c_args]]
    local leases, hosts = {}, {}
    local lds = hmget(k_sld(slave), urls)
    --[[mark:c_lease_hmget]]
    for c = 1, #lds do
      local data, d = lds[c], false
      if data then
        d = lease_fields(data)
        hosts[#hosts + 1] = d[4]
      end
      leases[c] = d
    end
    --[[mark:c_lease_fields]]
    prefetch(hosts)
    return leases
  end

  -- next_time records what a completion of outcome says of host, whose
  -- slot it freed, at now: the delay the slave reports (delay_arg, ms,
  -- capped at C.MAX_HOST_DELAY: K_HDELAY) and its next allowed time
  -- (K_HNEXT), moved to a jittered delay after now when the host takes
  -- one request at a time and the page was fetched (not released), and
  -- to at least the slave's backoff (backoff_arg, ms, capped at
  -- C.MAX_BACKOFF) after now. Writes only what changes, in the call's
  -- cache; a number that is not whole counts as 0.
  local function next_time(host, outcome, delay_arg, backoff_arg, now)
    -- most completions report neither ('0': a slave's honest zero)
    local slave_delay = delay_arg == '0' and 0 or whole(delay_arg, C.MAX_HOST_DELAY) or 0
    local backoff = backoff_arg == '0' and 0 or whole(backoff_arg, C.MAX_BACKOFF) or 0
    if slave_delay > 0 then hset(K_HDELAY, host, slave_delay) end
    local cur = host_next(host)
    local nxt = cur
    if outcome ~= 'release' and host_conc(host) == 1 then
      -- one request at a time: the next one starts a delay after this one ended
      nxt = math.max(nxt, after(now, jittered(host_delay(host), host_jitter(host))))
    end
    if backoff > 0 then nxt = math.max(nxt, after(now, backoff)) end
    if nxt ~= cur then hset(K_HNEXT, host, nxt) end
  end

  -- settle_undone applies the outcome (retry, fail or release) of the
  -- held completion at ARGV[i] that is not done to its task (host, prio,
  -- task: its lease's) for the call S: retry requeues it
  -- (requeue_or_fail) in K_RETRY (ZADD, due its retry_in_ms, capped at
  -- C.MAX_BACKOFF, after S.now) unless its attempts are used; fail puts
  -- it in K.FAILED (RPUSH) with the completion's reason and takes its
  -- cash back from lambda (aopic); release queues it again (push, at the
  -- front). Counts each in the stats.
  local function settle_undone(S, i, host, prio, task, outcome)
    local reason, now = ARGV[i + 6], S.now
    if outcome == 'retry' then
      local _, failed, nt = requeue_or_fail(host, prio, task, reason, now, S.slave)
      if not failed then
        local retry_in = whole(ARGV[i + 5], C.MAX_BACKOFF) or 0
        redis.call('ZADD', K_RETRY, nstr(now + retry_in), host .. '\t' .. prio .. '\t' .. nt)
        CALL.retry_added = true
        stat('retried', 1)
        work_added = true
      end
    elseif outcome == 'fail' then
      redis.call('RPUSH', K.FAILED, reason .. '\t' .. host .. '\t' .. prio .. '\t' .. task)
      stat('failed', 1)
      to_lambda(-(tonumber(prio) or 0))
    elseif outcome == 'release' then
      push(host, prio, task, true)
    end
  end

  -- duplicate reports whether the done page url of the completion at
  -- ARGV[i] is a duplicate: its content field (content_field, '' when
  -- not checked) in its content bucket (k_content) names another URL.
  -- The first URL with the content is written there (HSETNX; HGET when
  -- one was). A duplicate is counted, with an event naming the first URL.
  local function duplicate(S, url, i)
    local cfield = ARGV[i + 9]
    if cfield == '' then return false end
    local ck = k_content(ARGV[i + 8])
    if redis.call('HSETNX', ck, cfield, url) == 1 then return false end
    local first = redis.call('HGET', ck, cfield)
    if first == url then return false end
    stat('duplicates', 1)
    emit('duplicate', cjson.encode({crawl = CRAWL, url = url, first_url = first,
      content_hash = ARGV[i + 7], slave = S.slave, at = S.now}))
    return true
  end

  -- pay (aopic) pays a page's cash: the tax to lambda and the rest in
  -- equal shares to targets (positive: ARGV index of a new link's tuple,
  -- queued with -share as its prio by push; negative: minus the index of
  -- a still-queued link's tuple, whose pq score goes down by share:
  -- ZADD XX INCR); all to lambda without targets (to_lambda).
  local function pay(cash, targets)
    if #targets == 0 then
      to_lambda(cash)
      return
    end
    to_lambda(cash * C.AOPIC_TAX)
    local share = cash * (1 - C.AOPIC_TAX) / #targets
    for _, j in ipairs(targets) do
      if j > 0 then
        push(ARGV[j + 2], -share, ARGV[j + 5], false)
      else
        redis.call('ZADD', kq_pq(is_render(ARGV[5 - j]), ARGV[2 - j]), 'XX', 'INCR', -share, task_url(ARGV[5 - j]))
      end
    end
  end

  -- enqueue_links puts the nlinks link tuples from ARGV[at] on through
  -- take_link (scope, dedup, trap caps; in_scope: S's answers per scope
  -- host) and queues each new one (push; with aopic it is added to
  -- targets instead, for pay); with PQ a link to a URL still queued gets
  -- backlink's importance (priority) or goes to targets as -at (aopic).
  -- Returns the links queued or added to targets as new.
  local function enqueue_links(S, at, nlinks, targets)
    local in_scope, slave, now = S.in_scope, S.slave, S.now
    local added = 0
    for l = 0, nlinks - 1 do
      local j = at + TUPLE * l
      local took = take_link(j, in_scope, slave, now)
      if took == 'new' then
        if AOPIC then
          targets[#targets + 1] = j
        else
          push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
        end
        added = added + 1
      elseif took == 'old' and PQ and backlink(j) then
        targets[#targets + 1] = -j
      end
    end
    return added
  end

  -- complete_one acknowledges the completion at ARGV[i] (nev events, nlinks
  -- links, npol policies) for the call S, d being its URL's lease
  -- (read_leases'), and returns the ARGV index of the next completion.
  -- Ack 0 (appended to S.acks) when the lease is not held by S.slave with
  -- the completion's token, or an earlier completion of the call ended
  -- it. Else, in order: the host policies (set_policies), the lease ended
  -- (S.ended, S.ended_list: their entries go in complete_leases), the
  -- host's slot freed (host_done) and its next time (next_time), the
  -- outcome (done: counted; else settle_undone), the host's place in the
  -- ready sets (ready_host), the events (emit); for a done page the
  -- content check (duplicate: ack 2, its links not followed) and the
  -- links (enqueue_links, and pay with aopic; S.added counts them). Ack 1
  -- otherwise.
  local function complete_one(S, i, d, nev, nlinks, npol)
    local url, token, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local ev_at = i + COMPLETION
    local pol_at = ev_at + 2 * nev
    local links_at = pol_at + 4 * npol
    local acks = S.acks
    if S.ended[url] or not (d and d[6] and d[1] == S.slave and d[2] == token) then
      acks[#acks + 1] = 0
      return links_at + TUPLE * nlinks
    end
    acks[#acks + 1] = 1
    local host, prio, task = d[4], d[5], d[6]
    if npol > 0 then set_policies(pol_at, npol) end
    S.ended[url] = true
    S.ended_list[#S.ended_list + 1] = url
    CALL.warm[host] = true
    host_done(host)
    next_time(host, outcome, ARGV[i + 3], ARGV[i + 4], S.now)
    if outcome == 'done' then stat('done', 1) else settle_undone(S, i, host, prio, task, outcome) end
    ready_host(host)
    --[[mark:c_ack]]
    for e = 0, nev - 1 do
      emit(ARGV[ev_at + 2 * e], ARGV[ev_at + 2 * e + 1])
    end
    --[[mark:c_events]]
    if outcome ~= 'done' then return links_at + TUPLE * nlinks end
    local follow = not duplicate(S, url, i)
    if not follow then acks[#acks] = 2 end
    --[[mark:c_content]]
    local targets -- aopic only
    if AOPIC then targets = {} end
    if follow then S.added = S.added + enqueue_links(S, links_at, nlinks, targets) end
    if AOPIC then pay(-tonumber(prio), targets) end
    --[[mark:c_links]]
    return links_at + TUPLE * nlinks
  end

  -- complete_leases (the chunk local above): the call's state S holds the
  -- slave, the call's time, the acks, the links enqueued (added), the URLs
  -- whose lease the call ended (ended: a URL twice in a batch is lost the
  -- second time; ended_list: their lease and lease data entries, removed
  -- at the end in one ZREM and one HDEL, as nothing in the call reads
  -- them again) and each scope host's answer (in_scope: take_link)
  function complete_leases(slave, n, now, counts)
    CALL.now = now
    CALL.warm = {}
    local S = {slave = slave, now = now, acks = {}, added = 0, ended = {}, ended_list = {}, in_scope = {}}
    local leases = read_leases(slave, n, counts)
    --[[mark:c_prefetch]]
    local i = 5
    for c = 1, n do
      i = complete_one(S, i, leases[c], counts.ev[c], counts.links[c], counts.pol[c])
      --[[mark:c_other]]
    end
    local acks = S.acks
    acks[#acks + 1] = S.added
    call_chunked('ZREM', k_slease(slave), S.ended_list, 1)
    call_chunked('HDEL', k_sld(slave), S.ended_list, 1)
    --[[mark:c_lease_end]]
    return acks
  end
end

-- complete: acknowledge a batch of leases (complete_leases), in one atomic
-- step with their links and events.
--
-- KEYS: the meta key.
-- ARGV: prefix, slave, seed, n (1 to LIMITS.completions); then per
-- completion:
--
--   url, token, outcome, host_delay_ms, backoff_ms, retry_in_ms, reason,
--   content_hash_hex, content_bucket, content_field, n_events, n_links,
--   n_policies, then n_events × (type, data), then n_policies × policy,
--   then n_links × tuple
--
-- outcome is done, retry, fail or release; content_bucket and
-- content_field are the hash's shard.contentSlot, content_field '' when
-- the hash is not checked. A policy is host, delay_ms, jitter, conc, each
-- '' for the crawl's default (policyArgs). A tuple is bucket, field, host,
-- scope_host, prio, task, qvar (appendTuplesFP). Nothing else may follow.
-- Returns: an array of n acks (1 held, 2 held but its links not followed:
-- duplicate content; 0 lost) followed by the number of links enqueued.
-- Errors: NOPERM when the caller's Redis user is not the slave's; ERR
-- redcrawl: ... for arguments without their form (nothing is written).
register('complete', function()
  local slave = check_slave(ARGV[2])
  local seed = int(3, 0, 2147483647, 'seed')
  local n = int(4, 1, LIMITS.completions, 'n')
  local last, counts = check_completions(5, n)
  if last ~= #ARGV + 1 then fail('arguments follow the last completion') end
  check_own(slave)
  math.randomseed(seed)
  local acks = complete_leases(slave, n, now_ms(), counts)
  finish()
  return acks
end, {quiet = true})

-- complete_claim: complete's acknowledgements, then claim's lease, in one
-- atomic step: the host slots the acks free are claimable by this slave at
-- once, before another slave's claim can take them, and one call's fixed
-- cost serves both. The claim runs at the acks' time (one TIME call).
--
-- KEYS: the meta key.
-- ARGV: complete's ARGV, then max (1 to LIMITS.claim), render (0 or 1)
-- and max_held (as claim's).
-- Returns: complete's n acks and links enqueued, then claim's result.
register('complete_claim', function()
  local slave = check_slave(ARGV[2])
  local seed = int(3, 0, 2147483647, 'seed')
  local n = int(4, 1, LIMITS.completions, 'n')
  local last, counts = check_completions(5, n)
  if last + 2 ~= #ARGV then fail('want max, render and max_held after the last completion') end
  local maxn = int(last, 1, LIMITS.claim, 'max')
  local render = flag(last + 1, 'render')
  local max_held = int(last + 2, 0, 1000000, 'max_held')
  check_own(slave)
  math.randomseed(seed)
  local now = now_ms()
  local acks = complete_leases(slave, n, now, counts)
  maxn = held_cap(slave, maxn, max_held)
  -- the claim's result follows the acks in the same table
  if maxn <= 0 then return no_lease(acks, -2) end
  return claim_tasks(slave, maxn, render, now, acks)
end, {quiet = true})
