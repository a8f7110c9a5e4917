-- queue.lua: tasks, hosts' queues and politeness, links.

-- lease data: slave \t token \t leased_at \t host \t prio \t task
local function lease_fields(data)
  return {string.match(data, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')}
end

-- task string: depth \t hops \t attempt \t url
local function task_url(task)
  return string.match(task, '^[^\t]*\t[^\t]*\t[^\t]*\t(.*)$')
end

-- is_render: a render task's string starts with 'r' (its depth field)
local function is_render(task) return string.byte(task, 1) == 114 end

-- depth_of checks a task's depth field (encodeTask in redis.go:
-- [r][s<level>[x]:]<depth>[@<lastmod>]) and returns the depth, nil when
-- the field has another form
local function depth_of(df)
  if string.byte(df, 1) == 114 then df = string.sub(df, 2) end
  local d = string.match(df, '^%d+$')
  if d then return tonum(d) end
  if string.byte(df, 1) == 115 then
    local level, rest = string.match(df, '^s(%d+)x?:(.*)$')
    if not level or tonumber(level) < 1 then return nil end
    df = rest
  end
  local depth, lastmod = string.match(df, '^(%d+)(.*)$')
  if not depth or (lastmod ~= '' and not string.match(lastmod, '^@%-?%d+$')) then return nil end
  return tonum(depth)
end

-- DEEP is check_task's answer for a link deeper than crawl.max_depth: out
-- of scope, dropped as an honest slave drops it, not refused
local DEEP = 'deeper than crawl.max_depth'

-- check_task checks a task a caller queues (a link or a seed) and returns
-- nil, or why it is refused: its URL, within LIMITS.task bytes, must be an
-- http(s) URL whose authority (after any user info) is host, the host key
-- (urlx.HostKey), and its scope host the name in it; the task's fields and
-- prio must have their form (parseTask must read every task a claim
-- returns). With max_depth the depth is checked too. It runs for new
-- links only (about one a page) and takes the common forms by plain
-- string compares rather than patterns.
local function check_task(host, scope_host, prio, task, max_depth)
  if #task > LIMITS.task then return 'task longer than ' .. LIMITS.task .. ' bytes' end
  local t1 = string.find(task, '\t', 1, true)
  local t2 = t1 and string.find(task, '\t', t1 + 1, true)
  local t3 = t2 and string.find(task, '\t', t2 + 1, true)
  if not t3 or not string.find(string.sub(task, t1 + 1, t3 - 1), '^%d+\t%d+$') then return 'malformed task' end
  local depth = depth_of(string.sub(task, 1, t1 - 1))
  if not depth then return 'malformed depth field' end
  if max_depth and max_depth > 0 and depth > max_depth then return DEEP end
  -- the URL: its scheme, then host where the authority starts and ends
  local at
  if string.sub(task, t3 + 1, t3 + 7) == 'http://' then
    at = t3 + 8
  elseif string.sub(task, t3 + 1, t3 + 8) == 'https://' then
    at = t3 + 9
  else
    return 'not an http(s) URL'
  end
  local after = string.byte(task, at + #host)
  if string.sub(task, at, at + #host - 1) ~= host or (after and after ~= 47 and after ~= 63 and after ~= 35) or
    string.find(host, '[/?#@]') then
    -- user info before the host, or another host
    local authority = string.match(string.sub(task, at), '^([^/?#]*)')
    if string.match(authority, '[^@]*$') ~= host or authority == host then
      return 'host ' .. string.sub(host, 1, 80) .. ' is not the URL\'s'
    end
  end
  if scope_host ~= host and string.sub(host, 1, #scope_host + 1) ~= scope_host .. ':' and
    string.sub(host, 1, #scope_host + 2) ~= '[' .. scope_host .. ']' then
    return 'scope host is not the URL\'s'
  end
  local p = tonum(prio)
  if not p or p ~= p or p == math.huge or p == -math.huge then return 'priority is not a number' end
  if not PQ and (p % 1 ~= 0 or math.abs(p) > 1e9) then return 'priority is not a whole number' end
  return nil
end

-- refuse records a link or seed refused by its checks: counted in the
-- stats (refused), and the call's first one recorded as an exception
-- naming what was wrong (the calling slave's, or the crawl's stream)
local function refuse(task, why, slave, now)
  stat('refused', 1)
  refused = refused + 1
  if refused == 1 then
    emit('exception', cjson.encode({crawl = CRAWL, kind = 'invalid_input', url = string.sub(task_url(task) or '', 1, 200),
      host = '', slave = slave or '', attempt = 0, status = 0,
      message = 'refused by the frontier: ' .. why, at = now or 0}))
  end
end

-- drop_idle removes an idle host's politeness fields (hnext, hdelay):
-- nothing queued, in flight or pending is left of it
function FRESH.drop_idle(host)
  if hget(K_HNEXT, host) then hdel(K_HNEXT, host) end
  if hget(K_HDELAY, host) then hdel(K_HDELAY, host) end
end

-- make host claimable in each class (ready, rready) where it has queued
-- tasks and a free slot; the slots and next time are the host's, shared.
-- A host with nothing queued or in flight goes to hcool while its next
-- time is pending, and loses its politeness fields once it has passed
-- (FRESH.drop_idle; a claim sweeps hcool): an idle host costs nothing.
local function ready_host(host)
  local infl = host_infl(host)
  local free = infl < host_conc(host)
  local any = false
  -- the classes (CLASSES: static, render), without ipairs' calls
  for c = 0, 1 do
    local r = c == 1
    if queued(r, host) then
      any = true
      if free then ready_add(r, host, host_next(host)) else ready_rem(r, host) end
    else
      ready_rem(r, host)
    end
  end
  if any or infl > 0 then return end
  local nxt = host_next(host)
  if nxt > call_now() then
    local cool = CALL.cool or {}
    cool[#cool + 1] = nstr(nxt)
    cool[#cool + 1] = host
    CALL.cool = cool
  else
    FRESH.drop_idle(host)
  end
end

-- A fresh host's tasks are one value of the fresh hash: up to FRESH.MAX
-- entries in the order a claim takes them (priority, then FIFO; a task
-- pushed to the front goes before its priority's others), each
-- <length>:<body>, the body prio \t depth \t hops \t attempt \t U, where U
-- is the URL with its scheme and host (the field) left out: s or h and
-- the rest for https:// or http:// and the host, = and the URL otherwise.
FRESH.MAX = 4
-- FRESH.BYTES: a value past it takes no more tasks
FRESH.BYTES = 1024

-- goes_fresh reports whether a task of class r for host, which has no
-- task in the fresh hash, goes there: bfs and dfs, a static task, and a
-- host with no queue of its own, nothing in flight and no next fetch
-- time pending, whose lease this call did not end (CALL.warm: a host
-- just fetched keeps its next tasks in its own queue and the ready set,
-- taken in the ready set's order, soon, while the slave that fetched it
-- still holds its connection and DNS answer; from the fresh hash they
-- would wait for the fresh hosts' scan to come round)
function FRESH.goes(host, r)
  if PQ or r or (CALL.warm and CALL.warm[host]) then return false end
  return host_infl(host) == 0 and host_next(host) <= call_now() and not queued(false, host)
end

-- FRESH.body is a task's entry body (see above)
function FRESH.body(host, prio, task)
  local f3, url = string.match(task, '^([^\t]*\t[^\t]*\t[^\t]*)\t(.*)$')
  local u
  if string.sub(url, 1, 8 + #host) == 'https://' .. host then
    u = 's' .. string.sub(url, 9 + #host)
  elseif string.sub(url, 1, 7 + #host) == 'http://' .. host then
    u = 'h' .. string.sub(url, 8 + #host)
  else
    u = '=' .. url
  end
  return prio .. '\t' .. f3 .. '\t' .. u
end

-- FRESH.decode returns a fresh value's entries, {prio, task} each, nil
-- when it has not their form (a value no function wrote)
function FRESH.decode(host, v)
  local out, pos = {}, 1
  while pos <= #v do
    local c = string.find(v, ':', pos, true)
    local n = c and tonum(string.sub(v, pos, c - 1))
    if not n or n < 1 or c + n > #v then return nil end
    local prio, f3, kind, rest = string.match(string.sub(v, c + 1, c + n), '^([^\t]*)\t([^\t]*\t[^\t]*\t[^\t]*)\t(.)(.*)$')
    if not prio or not tonum(prio) then return nil end
    local url
    if kind == 's' then
      url = 'https://' .. host .. rest
    elseif kind == 'h' then
      url = 'http://' .. host .. rest
    else
      url = rest
    end
    out[#out + 1] = {prio, f3 .. '\t' .. url}
    pos = c + n + 1
  end
  if #out == 0 then return nil end
  return out
end

-- FRESH.encode is the fresh value of entries
function FRESH.encode(host, list)
  local parts = {}
  for i, e in ipairs(list) do
    local b = FRESH.body(host, e[1], e[2])
    parts[i] = #b .. ':' .. b
  end
  return table.concat(parts)
end

-- FRESH.insert puts a task among a fresh host's entries in claim order
function FRESH.insert(list, prio, task, front)
  local p = tonum(prio)
  local at = #list + 1
  for i, e in ipairs(list) do
    local q = tonum(e[1])
    if q > p or (front and q == p) then
      at = i
      break
    end
  end
  table.insert(list, at, {prio, task})
end

-- FRESH.room returns the host's fresh entries when the host is fresh and
-- has room for one more task, nil otherwise, and its current entries (or
-- nil) as second value
function FRESH.room(host)
  local cur = hget(K_FRESH, host)
  if not cur then return nil end
  local list = FRESH.decode(host, cur)
  if list and #list < FRESH.MAX and #cur < FRESH.BYTES then return list, list end
  return nil, list
end

-- push_queue puts a task in its host's queues of class r (see push)
local function push_queue(r, host, prio, task, front)
  if PQ then
    local f, url = string.match(task, '^([^\t]*\t[^\t]*\t[^\t]*)\t(.*)$')
    redis.call('ZADD', kq_pq(r, host), prio, url)
    redis.call('HSET', K_PQDATA, url, f)
  else
    local q = kq_queue(r, host, prio)
    local len
    if front then len = redis.call('LPUSH', q, task) else len = redis.call('RPUSH', q, task) end
    -- a list that was not empty already has its priority in prios
    if len == 1 then redis.call('ZADD', kq_prios(r, host), prio, prio) end
  end
  has_queue[r][host] = true
end

-- enqueue a task on its host, in the queues of its class (render tasks in
-- rq/rqp/rpq, claimable from rready): bfs and dfs put it in the list of its
-- priority (front: first among its priority), priority and aopic in the
-- host's pq with score prio and its depth, hops and attempt in pqdata.
-- A host with nothing queued, in flight or pending (FRESH.goes) keeps its
-- first FRESH.MAX tasks in the fresh hash, claimable without a ready-set
-- entry; one more moves them to its own queue, in their order, and the
-- host to the ready set.
local function push(host, prio, task, front)
  local r = is_render(task)
  if not PQ and not r then
    local list
    if hget(K_FRESH, host) then
      local room, cur = FRESH.room(host)
      if room then
        list = room
      else
        -- full: the host's tasks go to its own queue, in their order
        hdel(K_FRESH, host)
        if cur then
          for _, e in ipairs(cur) do push_queue(false, host, e[1], e[2], false) end
        else
          stat('refused', 1)
        end
      end
    elseif FRESH.goes(host, r) then
      list = {}
    end
    if list then
      FRESH.insert(list, prio, task, front)
      hset(K_FRESH, host, FRESH.encode(host, list))
      CALL.fresh_added = true
      stat('queued', 1)
      work_added = true
      return
    end
  end
  push_queue(r, host, prio, task, front)
  stat('queued', 1)
  if r then stat('rqueued', 1) end
  work_added = true
  if not in_ready_set(r, host) and host_infl(host) < host_conc(host) then
    ready_add(r, host, host_next(host))
  end
end

-- set_field sets a host's field of a policy hash to v, or deletes it when
-- v is '' (the crawl's default), writing only when it changes
local function set_field(key, host, v)
  local cur = hget(key, host)
  if v == '' then
    if cur then
      hdel(key, host)
      return true
    end
    return false
  end
  -- the cache holds the policy hashes' fields as numbers (hget); v was
  -- checked to be one (check_policies)
  local n = tonumber(v)
  if cur ~= n then
    hset(key, host, n)
    return true
  end
  return false
end

-- set_policy applies a host's HostPolicy (each value '' for the crawl's
-- default); a policy that is already in force costs no write
local function set_policy(host, delay, jitter, conc)
  local ch = set_field(K_HPDELAY, host, delay)
  ch = set_field(K_HJITTER, host, jitter) or ch
  ch = set_field(K_HCONC, host, conc) or ch
  if ch then ready_host(host) end
end

-- check_policies checks np policies from ARGV[at] on, 4 ARGV each (host,
-- delay_ms, jitter, conc: policyArgs), each value '' or a number in range
local function check_policies(at, np)
  if at + 4 * np - 1 > #ARGV then fail('policies run past the arguments') end
  for p = 0, np - 1 do
    local j = at + 4 * p
    if #ARGV[j] == 0 or #ARGV[j] > LIMITS.host then fail('policy host empty or longer than ' .. LIMITS.host .. ' bytes') end
    local d, jt, c = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
    if d ~= '' and not (tonumber(d) and tonumber(d) >= 0 and tonumber(d) <= LIMITS.policy_delay and tonumber(d) % 1 == 0) then
      fail('policy delay of ' .. ARGV[j] .. ' out of range')
    end
    if jt ~= '' and not (tonumber(jt) and tonumber(jt) >= 0 and tonumber(jt) <= 100) then fail('policy jitter of ' .. ARGV[j] .. ' out of range') end
    if c ~= '' and not (tonumber(c) and tonumber(c) >= 1 and tonumber(c) <= LIMITS.policy_conc and tonumber(c) % 1 == 0) then
      fail('policy concurrency of ' .. ARGV[j] .. ' out of range')
    end
  end
end

-- set_policies applies np checked policies from ARGV[at] on
local function set_policies(at, np)
  for p = 0, np - 1 do
    local j = at + 4 * p
    set_policy(ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3])
  end
end

-- aopic: cash that leaves the crawl (a failed task) goes to the lambda page
local function to_lambda(cash)
  if AOPIC and cash ~= 0 then redis.call('HINCRBYFLOAT', K_META, 'aopic_lambda', cash) end
end

-- admit counts a newly seen URL against the trap caps (host pages, query
-- variants per path key); with enforce a URL over a cap is not counted and
-- admit returns false and which cap. A path key qv is 8 bytes, or 9 ending
-- in 'd' for a query that holds a date, which has its own cap
-- (MaxDateVariants) and its own field: qv .. the cap, as before the cap
-- was a setting; any other qv is none.
--
-- A host whose tasks wait in the fresh hash, with no field in hpages,
-- has counted its fresh entries: the field is written when a URL of the
-- host does not go to fresh (task: the URL's task) or a claim takes one.
local function admit(host, qv, enforce, task)
  local pages, field
  if MAX_HOST_PAGES > 0 then
    field = hget(K_HPAGES, host)
    local c = tonumber(field or '0') or 0
    if not field and hget(K_FRESH, host) then
      local _, cur = FRESH.room(host)
      c = cur and #cur or 1
    end
    c = c + 1
    if enforce and c > MAX_HOST_PAGES then return false, 'host' end
    pages = c
  end
  local qcap = MAX_QVAR
  if #qv == 9 and string.byte(qv, 9) == 100 then
    qcap = C.MAX_DATE
    qv = qv .. qcap
  elseif #qv ~= 8 then
    qv = ''
  end
  if qcap > 0 and qv ~= '' then
    local c = redis.call('HINCRBY', K_QVAR, qv, '1')
    if enforce and c > qcap then
      redis.call('HINCRBY', K_QVAR, qv, '-1')
      return false, 'qvar'
    end
  end
  if pages then
    local stays = false
    if not field and not PQ and not is_render(task) then
      if hget(K_FRESH, host) then stays = FRESH.room(host) ~= nil else stays = FRESH.goes(host, false) end
    end
    if not stays then hset(K_HPAGES, host, pages) end
  end
  return true
end

-- trap_drop counts a link dropped by a cap; the first drop by a host's page
-- cap records one trap exception for the host
local function trap_drop(host, task, why, slave, now)
  stat('trap_dropped', 1)
  if why == 'host' and redis.call('HSETNX', K_HPAGES, '\t' .. host, nstr(now)) == 1 then
    emit('exception', cjson.encode({crawl = CRAWL, kind = 'trap', url = task_url(task), host = host,
      slave = slave, attempt = 0, status = 0,
      message = 'host page cap ' .. MAX_HOST_PAGES .. ' reached', at = now}))
  end
end

-- allowed reports whether a scope host is in crawl.allow_hosts (C.ALLOW,
-- C.SUFFIXES: urlx.Scope's host check)
local function allowed(h)
  if string.byte(h, -1) == 46 then h = string.sub(h, 1, -2) end
  if C.ALLOW[h] then return true end
  for _, sfx in ipairs(C.SUFFIXES) do
    if string.sub(h, -#sfx) == sfx then return true end
  end
  return false
end

-- scope_fp returns the scope set and member of a seed's host name: the
-- first 3 hex digits of its SHA-1 and the next 13 in decimal
-- (Keys.ScopeMember)
function FRESH.scope_fp(h)
  local x = redis.sha1hex(h)
  return K.SCOPE_PFX .. string.sub(x, 1, 3), string.format('%.0f', tonumber(string.sub(x, 4, 16), 16))
end

-- scope_has reports whether h is a seed's host name (in the scope sets)
function FRESH.scope_has(h)
  local key, m = FRESH.scope_fp(h)
  return redis.call('SISMEMBER', key, m) == 1
end

-- FRESH.scope_ok reports whether a scope host is in the crawl's host scope: a
-- seed's host name with scope by seeds, else one of crawl.allow_hosts (any
-- host when the crawl sets neither); cache keeps each host's answer for
-- the call
function FRESH.scope_ok(lscope, cache)
  if not (SCOPE_BY_SEEDS or SCOPE_HOSTS) then return true end
  local ok = cache[lscope]
  if ok == nil then
    if SCOPE_BY_SEEDS then ok = FRESH.scope_has(lscope) else ok = allowed(lscope) end
    cache[lscope] = ok
  end
  return ok
end

-- FRESH.scope_host is the scope host of a host key: without its port and the
-- brackets of an IPv6 address (urlx.Task's ScopeHost)
function FRESH.scope_host(host)
  return string.match(host, '^%[(.*)%]') or string.match(host, '^(.*):%d+$') or host
end

-- link_args reports whether the tuple at ARGV[j] has the form every use
-- of it before check_task relies on: only the seen arguments of the Bloom
-- filter need a look (seen_args); a host, scope host
-- or task of any other form only fails to match
local function link_args(j)
  return not BLOOM or seen_args(ARGV[j], ARGV[j + 1])
end

-- take_link puts the link tuple at ARGV[j] through its checks, scope
-- (in_scope caches each scope host's answer: scope_has with
-- scope by seeds, else crawl.allow_hosts), dedup and the trap caps. It
-- returns 'new' for a link seen now and admitted (counted in the stats'
-- seen; the caller queues it), 'old' for one seen before, and nil for one
-- refused, out of scope or dropped by a cap (a trap_drop). A link enters
-- the seen set only once admitted: one a cap or the depth limit drops is
-- not marked seen, so links a slave makes up to fill a cap cannot make a
-- real page of the host known, never to be fetched.
local function take_link(j, in_scope, slave, now)
  if BLOOM and not seen_args(ARGV[j], ARGV[j + 1]) then
    refuse(ARGV[j + 5], 'malformed link arguments', slave, now)
    return nil
  end
  local lhost, lscope = ARGV[j + 2], ARGV[j + 3]
  -- FRESH.scope_ok written out: every link of a page comes here
  if SCOPE_BY_SEEDS or SCOPE_HOSTS then
    local ok_scope = in_scope[lscope]
    if ok_scope == nil then
      if SCOPE_BY_SEEDS then
        ok_scope = FRESH.scope_has(lscope)
      else
        ok_scope = allowed(lscope)
      end
      in_scope[lscope] = ok_scope
    end
    if not ok_scope then return nil end
  end
  if seen_has(ARGV[j], ARGV[j + 1]) then return 'old' end
  -- a new link is checked whole before it is counted or queued: about
  -- one a page, where every link of a page reaches the seen check
  local why = check_task(lhost, lscope, ARGV[j + 4], ARGV[j + 5], C.MAX_DEPTH)
  if why == DEEP then return nil end
  if why then
    refuse(ARGV[j + 5], why, slave, now)
    return nil
  end
  local ok, cap = admit(lhost, ARGV[j + 6], true, ARGV[j + 5])
  if not ok then
    trap_drop(lhost, ARGV[j + 5], cap, slave, now)
    return nil
  end
  seen_add(ARGV[j], ARGV[j + 1])
  stat('seen', 1)
  return 'new'
end

-- backlink adds a found-again link to a URL still queued (the old result
-- of take_link): X more importance with the priority strategy; with aopic
-- it returns whether the URL is queued, to get a share of the page's cash
local function backlink(j)
  local task = ARGV[j + 5]
  local url = task_url(task)
  if not url then return false end
  local key = kq_pq(is_render(task), ARGV[j + 2])
  if C.STRATEGY == 'priority' then
    redis.call('ZADD', key, 'XX', 'INCR', -C.PRIO_X, url)
    return false
  end
  return AOPIC and redis.call('ZSCORE', key, url) ~= false
end

-- a task came back from a lease or a retry: count the attempt and requeue
-- it, or fail it once attempts are used. Returns the new attempt and
-- whether it failed.
local function requeue_or_fail(host, prio, task, reason, now, slave)
  local f = splitn(task, 4)
  local url = task_url(task)
  if not url or not tonum(f[3]) then
    -- a task no function queued: dropped, as if failed
    stat('refused', 1)
    return 0, true
  end
  local attempt = tonum(f[3]) + 1
  local nt = f[1] .. '\t' .. f[2] .. '\t' .. attempt .. '\t' .. url
  if attempt >= C.MAX_ATTEMPTS then
    redis.call('RPUSH', K.FAILED, reason .. '\t' .. host .. '\t' .. prio .. '\t' .. nt)
    stat('failed', 1)
    to_lambda(-(tonumber(prio) or 0))
    emit('exception', cjson.encode({crawl = CRAWL, kind = 'failed', url = url, host = host,
      slave = slave, attempt = attempt, status = 0,
      message = 'gave up after ' .. attempt .. ' attempts: ' .. reason, at = now}))
    return attempt, true
  end
  return attempt, false, nt
end

-- release a host slot after a lease ends
local function host_done(host)
  local infl = hincr(K_HINFL, host, -1)
  if infl <= 0 then hdel(K_HINFL, host) end
end
