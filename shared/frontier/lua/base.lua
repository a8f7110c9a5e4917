-- base.lua: what every function of the library starts from. The library
-- is one Lua chunk: library.go writes its header (the library's name, NS,
-- the key suffixes, the limits) and concatenates the files in
-- libraryFiles' order, so a file uses what the files before it define.
-- What a chunk-level local holds lives as long as the library: the helpers
-- and the caches of key names and settings below. What one call sees and
-- writes is reset by begin at the start of every call.
--
-- Redis runs one function at a time, so the per-call state below is the
-- calling function's alone. A function's main body keeps to 60 upvalues
-- (Lua 5.1): the keys, the settings and the call's state are fields of a
-- few tables rather than locals of their own.
--[[profile:decl]]

-- ARGV: the call's arguments; P: the crawl prefix (crawl:{name}: or, for
-- shard k > 0 of a sharded crawl, crawl:{name:k}:); K: its keys (keys_of);
-- C: the crawl's settings (settings_of); CRAWL: the crawl's name
local ARGV, P, K, C, CRAWL
-- EV_KEY: the stream this call's events go to, the crawl's (the master's
-- functions) or the calling slave's own (check_own sets it). SLAVE: the
-- call runs for a slave, whose Redis user may not write the finish marks
local EV_KEY, SLAVE

-- fail ends a call with an error that says what was wrong with its
-- arguments; a function checks everything it is given before it writes
-- anything, so a call that fails this way wrote nothing
local function fail(msg)
  error({err = 'ERR redcrawl: ' .. msg}, 0)
end

-- A key table per prefix: the fixed keys by name (FIXED_KEYS), the
-- prefixes of the per-host and per-bucket keys, and the names of the Bloom
-- segments and seen buckets met so far (name_cache). What they hold lives
-- as long as the library, and every call's collector steps walk it, so it
-- is bounded three ways:
--  - a table idle since the last sweep goes at the next one (a sweep every
--    LIMITS.sweep calls: sweep), so a Redis that runs crawl after crawl
--    keeps the tables of the crawls that are running;
--  - the names of all tables together are at most LIMITS.names (a table
--    that would pass it starts its names again, as does one past
--    LIMITS.table_names of a kind): ~0.7 MB at most however many crawls
--    and shards run;
--  - a caller naming more than LIMITS.prefixes prefixes empties them all.
-- MEM holds them: tables by prefix and their count, the names held,
-- calls (begin counts them) and swept (calls at the last sweep); one
-- chunk local (a chunk keeps to Lua's 200) with the helpers name_cache
-- and sweep below.
local MEM = {tables = {}, count = 0, names = 0, calls = 0, swept = 0}
local function keys_of(p)
  local k = MEM.tables[p]
  if k then return k end
  if MEM.count >= LIMITS.prefixes then
    MEM.tables, MEM.count, MEM.names = {}, 0, 0
  end
  k = {bloom = {n = 0}, seen_names = {n = 0}}
  for name, sfx in pairs(FIXED_KEYS) do k[name] = p .. sfx end
  for name, sfx in pairs(KEY_PREFIXES) do k[name] = p .. sfx end
  k.policy = {[k.HPDELAY] = true, [k.HJITTER] = true, [k.HCONC] = true}
  -- the per-host hashes of numbers: the call's cache holds their fields
  -- as numbers, converted once when read (cache.lua: hget, prefetch)
  k.numeric = {[k.HINFL] = true, [k.HNEXT] = true, [k.HDELAY] = true, [k.HPDELAY] = true,
    [k.HJITTER] = true, [k.HCONC] = true, [k.HPAGES] = true}
  -- the keys that do not exist in most calls of a crawl like make bench's
  -- (FRESH.quiet): the policy hashes, the slaves' delays, the render
  -- ready set, the validators, the retries, the idle hosts, the fresh
  -- hosts and the controls
  k.quiet = {k.HPDELAY, k.HJITTER, k.HCONC, k.HDELAY, k.RREADY, k.VAL, k.RETRY, k.COOL, k.FRESH, k.CONTROL}
  -- those that exist in few crawls, broad ones included (FRESH.rare),
  -- and which EXISTS the crawl's next calls ask (FRESH.quiet)
  k.rare = {k.HPDELAY, k.HJITTER, k.HCONC, k.HDELAY, k.RREADY, k.VAL, k.CONTROL}
  k.hint = {left = 0, rare_found = false}
  -- the crawl's name: the hash tag without a shard's :k (a name holds no
  -- colon: ValidName)
  k.crawl = string.match(p, '^crawl:{([^:}]+)')
  k.used = MEM.calls
  MEM.tables[p] = k
  MEM.count = MEM.count + 1
  return k
end

-- name_cache returns the table of K's cache field (seen_names or bloom)
-- that a new name goes into: the same table, or an empty one when it holds
-- LIMITS.table_names or all the tables' names are at LIMITS.names
function MEM.name_cache(field)
  local names = K[field]
  if names.n >= LIMITS.table_names or MEM.names >= LIMITS.names then
    MEM.names = MEM.names - names.n
    if MEM.names >= LIMITS.names then
      -- the other tables hold the budget: all start again
      for _, k in pairs(MEM.tables) do
        k.seen_names, k.bloom = {n = 0}, {n = 0}
      end
      MEM.names = 0
    end
    names = {n = 0}
    K[field] = names
  end
  MEM.names = MEM.names + 1
  names.n = names.n + 1
  return names
end

-- A crawl's settings are the string the master wrote to K.CFG (cfgString
-- in settings.go), parsed once per distinct string: a tab-separated
-- record, the last field the allowed hosts separated by spaces. At most
-- LIMITS.settings, and one idle since the last sweep goes at the next.
local settings_cache, settings_count = {}, 0
local function settings_of(s)
  local c = settings_cache[s]
  if c then return c end
  local f = {}
  for v in string.gmatch(s .. '\t', '([^\t]*)\t') do f[#f + 1] = v end
  if #f ~= SETTINGS_FIELDS then fail('the crawl settings have ' .. #f .. ' fields, not ' .. SETTINGS_FIELDS) end
  local n = function(i) return tonumber(f[i]) or fail('crawl setting ' .. i .. ' is not a number') end
  c = {STRATEGY = f[1], JITTER_DIST = f[2], PRIO_X = n(3), AOPIC_TAX = n(4), LAMBDA_MIN = n(5),
    MAX_HOST_PAGES = n(6), MAX_QVAR = n(7), DEF_CONC = n(8), DEF_DELAY = n(9), DEF_JITTER = n(10),
    BLOOM = f[11] == 'bloom', BLOOM_M = n(12), BLOOM_K = n(13), BLOOM_SEG = n(14), SEEN_LOAD = n(15),
    MAX_ATTEMPTS = n(16), SCOPE_BY_SEEDS = f[17] == '1', LEASE_MS = n(18), MAX_DATE = n(19),
    MAX_HOST_DELAY = n(20), MAX_BACKOFF = n(21), MAX_DEPTH = n(22), ALLOW = {}, SUFFIXES = {}}
  c.PQ = c.STRATEGY == 'priority' or c.STRATEGY == 'aopic'
  c.AOPIC = c.STRATEGY == 'aopic'
  -- new tasks go to the front of their list with dfs (LIFO within a depth)
  c.NEW_FRONT = c.STRATEGY == 'dfs'
  for h in string.gmatch(f[23], '%S+') do
    local base = string.match(h, '^%*%.(.+)$')
    if base then
      c.ALLOW[base] = true
      c.SUFFIXES[#c.SUFFIXES + 1] = '.' .. base
    else
      c.ALLOW[h] = true
    end
  end
  c.SCOPE_HOSTS = next(c.ALLOW) ~= nil
  if settings_count >= LIMITS.settings then
    settings_cache, settings_count = {}, 0
  end
  settings_cache[s] = c
  settings_count = settings_count + 1
  return c
end

-- sweep drops the key tables and settings no call has used since the
-- last sweep (begin marks what a call uses with MEM.calls). Called every
-- LIMITS.sweep calls; it walks at most LIMITS.prefixes tables and
-- LIMITS.settings settings.
function MEM.sweep()
  local swept = MEM.swept
  for p, k in pairs(MEM.tables) do
    if k.used < swept then
      MEM.names = MEM.names - k.seen_names.n - k.bloom.n
      MEM.tables[p] = nil
      MEM.count = MEM.count - 1
    end
  end
  for s, c in pairs(settings_cache) do
    if c.used < swept then
      settings_cache[s] = nil
      settings_count = settings_count - 1
    end
  end
  MEM.swept = MEM.calls
end

-- The keys, settings and state below are what a call uses most: locals
-- of the chunk (upvalues of the helpers), set by begin, rather than fields
-- of K, C and a state table, a table lookup each time they are read.

-- the hot keys of the call's crawl (K holds them all)
local K_META, K_STATS, K_READY, K_RREADY, K_HNEXT, K_HINFL, K_HDELAY, K_HPDELAY, K_HJITTER, K_HCONC
local K_PQDATA, K_HPAGES, K_QVAR, K_RETRY, K_SLAVES, K_FRESH
local K_SEEN_PFX, K_QUEUE_PFX, K_PRIOS_PFX, K_PQ_PFX, K_RQUEUE_PFX, K_RPRIOS_PFX, K_RPQ_PFX, K_CONTENT_PFX, K_SLAVE_PFX
-- POLICY: the hosts' policy hashes, empty in most crawls (cache.lua: hget)
local POLICY
local function bind_keys(k)
  K_META, K_STATS, K_READY, K_RREADY, K_HNEXT = k.META, k.STATS, k.READY, k.RREADY, k.HNEXT
  K_HINFL, K_HDELAY, K_HPDELAY, K_HJITTER, K_HCONC = k.HINFL, k.HDELAY, k.HPDELAY, k.HJITTER, k.HCONC
  K_PQDATA, K_HPAGES, K_QVAR, K_RETRY, K_SLAVES = k.PQDATA, k.HPAGES, k.QVAR, k.RETRY, k.SLAVES
  K_FRESH = k.FRESH
  K_SEEN_PFX, K_QUEUE_PFX, K_PRIOS_PFX, K_PQ_PFX = k.SEEN_PFX, k.QUEUE_PFX, k.PRIOS_PFX, k.PQ_PFX
  K_RQUEUE_PFX, K_RPRIOS_PFX, K_RPQ_PFX = k.RQUEUE_PFX, k.RPRIOS_PFX, k.RPQ_PFX
  K_CONTENT_PFX, K_SLAVE_PFX, POLICY = k.CONTENT_PFX, k.SLAVE_PFX, k.policy
end

-- the hot settings of the call's crawl (C holds them all)
local PQ, AOPIC, NEW_FRONT, BLOOM, SCOPE_BY_SEEDS, SCOPE_HOSTS
local DEF_CONC, DEF_DELAY, DEF_JITTER, MAX_HOST_PAGES, MAX_QVAR, JITTER_DIST
local function bind_settings(c)
  PQ, AOPIC, NEW_FRONT, BLOOM = c.PQ, c.AOPIC, c.NEW_FRONT, c.BLOOM
  SCOPE_BY_SEEDS, SCOPE_HOSTS, DEF_CONC, DEF_DELAY = c.SCOPE_BY_SEEDS, c.SCOPE_HOSTS, c.DEF_CONC, c.DEF_DELAY
  DEF_JITTER, MAX_HOST_PAGES, MAX_QVAR, JITTER_DIST = c.DEF_JITTER, c.MAX_HOST_PAGES, c.MAX_QVAR, c.JITTER_DIST
end

-- The call's caches and buffers (cache.lua, queue.lua, dedup.lua), new for
-- every call: hcache[key][host], hdirty[key] = {list, set}, hdirty_keys:
-- the politeness hashes' write-behind cache; policies_empty: the policy
-- hashes were empty; stat_delta, stat_order: the stats' changes; in_ready,
-- rdirty, rready_empty: the ready sets' write-behind cache; has_queue,
-- no_render: which hosts have queued tasks; ev_buf: the events to write,
-- flat (type, data, ...); work_added: work was queued (finish reopens the
-- crawl); lh_state: the growing seen buckets' state (LH.state); refused:
-- links refused by their checks (refuse); readied: the hosts this call
-- made claimable that were not (ready_add), for the wake-up (finish);
-- CALL: the rest, in one table: now (the call's clock, call_now),
-- fresh_added (a task went to the fresh hash: the wake-up), fresh_empty
-- (the fresh hash was empty at the call's first look: FRESH.known_empty), cool (next time, host
-- pairs for hcool, flat: ready_host), quiet (FRESH.quiet), retry_added (a
-- completion added a retry), wait_until (meta's mark: LH.wait_mark)
local hcache, hdirty, hdirty_keys, policies_empty, stat_delta, stat_order
local in_ready, rdirty, rready_empty, has_queue, no_render, ev_buf, work_added, lh_state, refused, readied
local CALL
-- FRESH: the helpers of the fresh hosts, scope sets, idle hosts and the
-- registry (base.lua, queue.lua, claim.lua), fields of one table to keep
-- the chunk's locals within Lua's 200
local FRESH = {}
local function reset_state()
  hcache, hdirty, hdirty_keys, policies_empty = {}, {}, {}, nil
  stat_delta, stat_order = {}, {}
  in_ready = {[false] = {}, [true] = {}}
  rdirty = {}
  rready_empty, has_queue, no_render = nil, {[false] = {}, [true] = {}}, nil
  ev_buf, work_added, lh_state, refused, readied = {}, false, nil, 0, {}
  CALL = {}
end

-- begin checks a call's crawl (KEYS[1] is its meta key and ARGV[1] its
-- prefix), reads its settings when the function needs them, and resets the
-- call's state
local function begin(keys, args, need_settings)
  --[[profile:start]]
  ARGV = args
  P = args[1]
  if #keys ~= 1 or type(P) ~= 'string' or keys[1] ~= P .. 'meta' then
    fail('a call names its crawl by one key, its meta key, and its prefix first in ARGV')
  end
  local calls = MEM.calls + 1
  MEM.calls = calls
  if calls - MEM.swept >= LIMITS.sweep then MEM.sweep() end
  K = MEM.tables[P]
  if not K then
    if #P > LIMITS.prefix or not (string.match(P, '^crawl:{[%w_%.%-]+}:$') or string.match(P, '^crawl:{[%w_%.%-]+:[%d%-]+}:$')) then
      fail('not a crawl prefix: ' .. string.sub(P, 1, 80))
    end
    K = keys_of(P)
  end
  K.used = calls
  bind_keys(K)
  CRAWL = K.crawl
  EV_KEY, SLAVE = K.EVENTS, false
  if need_settings then
    local s = redis.call('GET', K.CFG)
    if not s then
      fail('crawl ' .. CRAWL .. ' has no settings: a master of this version writes them when it opens the crawl (bin/master run or seed)')
    end
    C = settings_of(s)
    C.used = calls
    bind_settings(C)
  else
    C = nil
  end
  reset_state()
  --[[mark:prelude]]
end

-- register makes body a function of the library named NS .. name. Unless
-- opts.settings is false, the call reads the crawl's settings first (C).
-- With opts.quiet the call may learn at once that K.quiet's keys are all
-- absent (FRESH.quiet): only for functions that write none of them but
-- through the call's caches, or say so (CALL.retry_added).
local function register(name, body, opts)
  opts = opts or {}
  local need = opts.settings ~= false
  local quiet = opts.quiet and 'ask' or nil
  redis.register_function{
    function_name = NS .. name,
    callback = function(keys, args)
      begin(keys, args, need)
      CALL.quiet = quiet
      return body()
    end,
    flags = opts.flags or {},
  }
end

-- the keys of a slave: its own leases, lease data, heartbeat and events
-- (Keys.SlaveLease, SlaveLeaseData, SlaveBeat, SlaveEvents), which only its
-- own Redis user may write (acl.go)
local function k_slease(s) return K_SLAVE_PFX .. s .. ':lease' end
local function k_sld(s) return K_SLAVE_PFX .. s .. ':ld' end
local function k_sbeat(s) return K_SLAVE_PFX .. s .. ':hb' end
local function k_sev(s) return K_SLAVE_PFX .. s .. ':ev' end
local function k_seen(b) return K_SEEN_PFX .. b end

-- FRESH.registry returns the registry's first LIMITS.slaves members by
-- join time (with their scores when withscores). Every loop over the
-- registry goes through it: a slave's Redis user may ZADD the registry
-- (a function it calls registers it), so a hostile one can grow it
-- without end; a call then still costs no more than LIMITS.slaves
-- slaves, and the master's monitor drops the members that are no slave
-- (Redis.PruneRegistry).
function FRESH.registry(withscores)
  if withscores then
    return redis.call('ZRANGE', K_SLAVES, 0, LIMITS.slaves - 1, 'WITHSCORES')
  end
  return redis.call('ZRANGE', K_SLAVES, 0, LIMITS.slaves - 1)
end
local function k_content(b) return K_CONTENT_PFX .. b end

-- the keys of a host's queues of one class: render (r true) or static
local function kq_queue(r, host, prio)
  if r then return K_RQUEUE_PFX .. host .. ':' .. prio end
  return K_QUEUE_PFX .. host .. ':' .. prio
end
local function kq_prios(r, host) if r then return K_RPRIOS_PFX .. host end return K_PRIOS_PFX .. host end
local function kq_pq(r, host) if r then return K_RPQ_PFX .. host end return K_PQ_PFX .. host end
local function kq_ready(r) if r then return K_RREADY end return K_READY end
-- the two classes, static (false) and render (true), for loops over both
local CLASSES = {false, true}

-- check_slave checks a slave id's form (config.CheckSlaveID): only such
-- names make the slave's keys (acl.go)
local function check_slave(s)
  if type(s) ~= 'string' or #s > 64 or not string.match(s, '^[%w_%.%-]+$') then
    fail('not a slave id: ' .. string.sub(tostring(s), 1, 80))
  end
  return s
end

-- check_own fails the call before it writes anything unless the calling
-- Redis user may write slave s's own keys: a slave whose id is not the one
-- its ACL user was made for is refused, and no slave can act with another's
-- leases. The call's events then go to the slave's own stream.
local function check_own(s)
  check_slave(s)
  if not redis.acl_check_cmd('HSET', k_sld(s), 'u', 'v') or not redis.acl_check_cmd('ZADD', k_slease(s), '0', 'u') then
    error({err = 'NOPERM this Redis user may not write the keys of slave ' .. s ..
      ': is its slave.id the one its ACL user was made for (bin/master acl --role slave --slave ID)?'}, 0)
  end
  EV_KEY = k_sev(s)
  SLAVE = true
end

-- master_only fails the call before it writes anything unless the calling
-- Redis user is a master's (or an admin's): only they may write the
-- finish marks. A slave's user that calls a master's function would
-- otherwise run it until its first command the user may not, and leave
-- its first writes behind.
local function master_only()
  if not redis.acl_check_cmd('HSET', K.FINISH, 'u', 'v') then
    error({err = 'NOPERM only a master\'s Redis user may call this function'}, 0)
  end
end

-- arg_count checks that the call has exactly n arguments
local function arg_count(n)
  if #ARGV ~= n then fail('want ' .. n .. ' arguments, got ' .. #ARGV) end
end

-- tonum is tonumber for the small whole numbers a call reads most (counts,
-- delays of 0, depths, priorities, attempts) from a table made at load:
-- tonumber's strtod costs more than the lookup.
-- nstr is a number as redis.call passes it (a string, %.17g), made
-- without that snprintf of a double when the number is whole: from a
-- table made at load for 0 to 1023, else with %d (the same digits below
-- 2^53); anything else is returned as it is (strings too)
local tonum, nstr
do
  local small, strs = {}, {}
  for i = 0, 1023 do
    local s = '' .. i
    small[s], strs[i] = i, s
  end
  tonum = function(s) return small[s] or tonumber(s) end
  nstr = function(n)
    if type(n) ~= 'number' then return n end
    local s = strs[n]
    if s then return s end
    if n % 1 == 0 and n > -9007199254740992 and n < 9007199254740992 then return string.format('%d', n) end
    return n
  end
end

-- int reads ARGV[i] as a whole number in [lo, hi]
local function int(i, lo, hi, what)
  local v = tonum(ARGV[i])
  if not v or v ~= math.floor(v) or v < lo or v > hi then
    fail(what .. ' must be a whole number in [' .. lo .. ', ' .. hi .. '], got ' .. string.sub(tostring(ARGV[i]), 1, 40))
  end
  return v
end

-- str reads ARGV[i] as a string of at most n bytes
local function str(i, n, what)
  local v = ARGV[i]
  if v == nil or #v > n then fail(what .. ' is missing or longer than ' .. n .. ' bytes') end
  return v
end

-- flag reads ARGV[i] as '0' or '1'
local function flag(i, what)
  local v = ARGV[i]
  if v ~= '0' and v ~= '1' then fail(what .. ' must be 0 or 1') end
  return v == '1'
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- call_now is the call's clock, read once (what a push compares a host's
-- next fetch time with)
local function call_now()
  if not CALL.now then CALL.now = now_ms() end
  return CALL.now
end

-- after returns the first whole millisecond at least d ms after the real
-- time now_ms was floored from, so a delay is never shortened by rounding
local function after(now, d)
  if d <= 0 then return now end
  return now + 1 + d
end

-- split a tab-separated string into at most n fields; the last keeps the rest
local function splitn(s, n)
  local out = {}
  local pos = 1
  for _ = 1, n - 1 do
    local j = string.find(s, '\t', pos, true)
    if not j then break end
    out[#out + 1] = string.sub(s, pos, j - 1)
    pos = j + 1
  end
  out[#out + 1] = string.sub(s, pos)
  return out
end

-- call_chunked runs redis.call(cmd, key, args...) in chunks of at most 1000
-- args (Lua's unpack limit), a multiple of step (the args of one item)
local function call_chunked(cmd, key, args, step)
  local size = 1000 - 1000 % step
  for from = 1, #args, size do
    redis.call(cmd, key, unpack(args, from, math.min(from + size - 1, #args)))
  end
end

-- hmget reads fields of the hash key in chunks of at most 1000 (Lua's
-- unpack limit) and returns their values in order (false when absent);
-- one chunk's reply is returned as it is
local function hmget(key, fields)
  local nf = #fields
  if nf == 0 then return {} end
  if nf <= 1000 then return redis.call('HMGET', key, unpack(fields)) end
  local out = {}
  for from = 1, nf, 1000 do
    local got = redis.call('HMGET', key, unpack(fields, from, math.min(from + 999, nf)))
    for k = 1, #got do out[from + k - 1] = got[k] end
  end
  return out
end
