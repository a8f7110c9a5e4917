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

-- complete_leases acknowledges the n completions from ARGV[5] on (checked)
-- for slave. For each it checks the lease is still held by this slave with
-- this token (a lost lease cannot be acked: nothing of it is applied),
-- ends the lease, frees the host's slot and sets its next allowed time,
-- applies the outcome, buffers the events and enqueues the links that were
-- never seen. It returns the acks and the number of links enqueued;
-- nothing is flushed yet (finish).
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
local function complete_leases(slave, n, now, counts)
  local i = 5
  CALL.now = now
  CALL.warm = {}
  local acks = {}
  local added = 0
  -- the leases' data, read in one HMGET up front; ended: the URLs whose
  -- lease this call ended (a URL twice in a batch is then lost the second
  -- time), whose lease and leasedata entries go in one ZREM and one HDEL at
  -- the end: nothing in this call reads them again
  local lease_urls, ended, ended_list = {}, {}, {}
  do
    local j = 5
    for c = 1, n do
      lease_urls[c] = ARGV[j]
      j = j + COMPLETION + 2 * counts.ev[c] + 4 * counts.pol[c] + TUPLE * counts.links[c]
    end
  end
  --[[mark:c_args]]
  -- lease_data[c]: completion c's lease fields (lease_fields), false when
  -- the URL has no lease
  local lease_data = {}
  do
    local hosts = {}
    local lds = hmget(k_sld(slave), lease_urls)
    --[[mark:c_lease_hmget]]
    for c, data in ipairs(lds) do
      local d = false
      if data then
        d = lease_fields(data)
        hosts[#hosts + 1] = d[4]
      end
      lease_data[c] = d
    end
    --[[mark:c_lease_fields]]
    -- the hosts' politeness fields, one HMGET per hash
    prefetch(hosts)
  end
  --[[mark:c_prefetch]]
  -- in_scope caches each scope host's answer (take_link)
  local in_scope = {}

  -- aopic: pay a page's cash, the tax to lambda and the rest in equal shares
  -- to targets (positive: ARGV index of a new link's tuple; negative: minus
  -- the index of a still-queued link's tuple); all to lambda without targets
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

  for c = 1, n do
    local i0 = i
    local url, token, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local reason, chash, cbucket, cfield = ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
    local nev, nlinks, npol = counts.ev[c], counts.links[c], counts.pol[c]
    local ev_at = i + COMPLETION
    local pol_at = ev_at + 2 * nev
    local links_at = pol_at + 4 * npol
    i = links_at + TUPLE * nlinks

    local d = lease_data[c]
    if ended[url] or (d and not d[6]) then d = false end
    local held = false
    if d then
      held = d[1] == slave and d[2] == token
    end
    if not held then
      acks[#acks + 1] = 0
    else
      acks[#acks + 1] = 1
      local host, prio, task = d[4], d[5], d[6]
      set_policies(pol_at, npol)
      ended[url] = true
      ended_list[#ended_list + 1] = url
      CALL.warm[host] = true
      host_done(host)
      -- most completions report neither ('0': a slave's honest zero)
      local a3, a4 = ARGV[i0 + 3], ARGV[i0 + 4]
      local slave_delay = a3 == '0' and 0 or whole(a3, C.MAX_HOST_DELAY) or 0
      local backoff = a4 == '0' and 0 or whole(a4, C.MAX_BACKOFF) or 0
      if slave_delay > 0 then hset(K_HDELAY, host, slave_delay) end
      local cur = host_next(host)
      local nxt = cur
      if outcome ~= 'release' and host_conc(host) == 1 then
        -- one request at a time: the next one starts a delay after this one ended
        nxt = math.max(nxt, after(now, jittered(host_delay(host), host_jitter(host))))
      end
      if backoff > 0 then nxt = math.max(nxt, after(now, backoff)) end
      if nxt ~= cur then hset(K_HNEXT, host, nxt) end

      if outcome == 'done' then
        stat('done', 1)
      elseif outcome == 'retry' then
        local _, failed, nt = requeue_or_fail(host, prio, task, reason, now, slave)
        if not failed then
          local retry_in = whole(ARGV[i0 + 5], C.MAX_BACKOFF) or 0
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
      ready_host(host)
      --[[mark:c_ack]]
      for e = 0, nev - 1 do
        emit(ARGV[ev_at + 2 * e], ARGV[ev_at + 2 * e + 1])
      end
      --[[mark:c_events]]
      if outcome == 'done' then
        local follow = true
        if cfield ~= '' then
          local ck = k_content(cbucket)
          if redis.call('HSETNX', ck, cfield, url) == 0 then
            local first = redis.call('HGET', ck, cfield)
            if first ~= url then
              follow = false
              acks[#acks] = 2
              stat('duplicates', 1)
              emit('duplicate', cjson.encode({crawl = CRAWL, url = url, first_url = first,
                content_hash = chash, slave = slave, at = now}))
            end
          end
        end
        --[[mark:c_content]]
        local targets -- aopic only
        if AOPIC then targets = {} end
        if follow then
          for l = 0, nlinks - 1 do
            local j = links_at + TUPLE * l
            local took = take_link(j, in_scope, slave, now)
            if took == 'new' then
              if AOPIC then
                targets[#targets + 1] = j
              else
                push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
              end
              added = added + 1
            elseif took == 'old' and PQ and backlink(j) then
              -- aopic: a still-queued URL gets a share of the page's cash
              targets[#targets + 1] = -j
            end
          end
        end
        if AOPIC then pay(-tonumber(prio), targets) end
        --[[mark:c_links]]
      end
    end
    --[[mark:c_other]]
  end
  acks[#acks + 1] = added
  call_chunked('ZREM', k_slease(slave), ended_list, 1)
  call_chunked('HDEL', k_sld(slave), ended_list, 1)
  --[[mark:c_lease_end]]
  return acks
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
