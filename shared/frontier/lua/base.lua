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
-- segments met so far. Bounded: a caller naming many prefixes empties it.
local key_tables, key_table_count = {}, 0
local function keys_of(p)
  local k = key_tables[p]
  if k then return k end
  if key_table_count >= LIMITS.prefixes then
    key_tables, key_table_count = {}, 0
  end
  k = {bloom = {}}
  for name, sfx in pairs(FIXED_KEYS) do k[name] = p .. sfx end
  for name, sfx in pairs(KEY_PREFIXES) do k[name] = p .. sfx end
  -- the crawl's name: the hash tag without a shard's :k
  local tag = string.match(p, '^crawl:{(.-)}:$')
  k.crawl = string.match(tag, '^(.-):%d+$') or tag
  key_tables[p] = k
  key_table_count = key_table_count + 1
  return k
end

-- A crawl's settings are the string the master wrote to K.CFG (cfgString
-- in settings.go), parsed once per distinct string: a tab-separated
-- record, the last field the allowed hosts separated by spaces.
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
  c.SEEN_FIXED = c.SEEN_LOAD == 0
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

-- the call's caches and buffers (cache.lua, queue.lua, dedup.lua): new for
-- every call
local S

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
  if #P > LIMITS.prefix or not (string.match(P, '^crawl:{[%w_%.%-]+}:$') or string.match(P, '^crawl:{[%w_%.%-]+:%d+}:$')) then
    fail('not a crawl prefix: ' .. string.sub(P, 1, 80))
  end
  K = keys_of(P)
  CRAWL = K.crawl
  EV_KEY, SLAVE = K.EVENTS, false
  if need_settings then
    local s = redis.call('GET', K.CFG)
    if not s then
      fail('crawl ' .. CRAWL .. ' has no settings: a master of this version writes them when it opens the crawl (bin/master run or seed)')
    end
    C = settings_of(s)
  else
    C = nil
  end
  S = {
    -- hcache[key][host], hdirty[key] = {list, set}, hdirty_keys: the
    -- politeness hashes' write-behind cache (cache.lua)
    hcache = {}, hdirty = {}, hdirty_keys = {}, policies_empty = nil,
    -- the stats' deltas, written at the end (flush_stats)
    stat_delta = {}, stat_order = {},
    -- the ready sets' write-behind cache
    in_ready = {[false] = {}, [true] = {}},
    rdirty = {[false] = {list = {}, set = {}}, [true] = {list = {}, set = {}}},
    rready_empty = nil,
    -- has_queue[r][host]: the host has queued tasks of class r
    has_queue = {[false] = {}, [true] = {}}, no_render = nil,
    -- the events to write (flush_events), flat: type, data, ...
    ev_buf = {},
    -- work was queued: finish reopens the crawl
    work_added = false,
    -- the growing seen buckets' state (dedup.lua: LH.state)
    lh = nil,
    -- links refused by their checks (queue.lua: refuse)
    refused = 0,
  }
  --[[mark:prelude]]
end

-- register makes body a function of the library named NS .. name. Unless
-- opts.settings is false, the call reads the crawl's settings first (C).
local function register(name, body, opts)
  opts = opts or {}
  local need = opts.settings ~= false
  redis.register_function{
    function_name = NS .. name,
    callback = function(keys, args)
      begin(keys, args, need)
      return body()
    end,
    flags = opts.flags or {},
  }
end

-- the keys of a slave: its own leases, lease data, heartbeat and events
-- (Keys.SlaveLease, SlaveLeaseData, SlaveBeat, SlaveEvents), which only its
-- own Redis user may write (acl.go)
local function k_slease(s) return K.SLAVE_PFX .. s .. ':lease' end
local function k_sld(s) return K.SLAVE_PFX .. s .. ':ld' end
local function k_sbeat(s) return K.SLAVE_PFX .. s .. ':hb' end
local function k_sev(s) return K.SLAVE_PFX .. s .. ':ev' end
local function k_seen(b) return K.SEEN_PFX .. b end
local function k_content(b) return K.CONTENT_PFX .. b end

-- the keys of a host's queues of one class: render (r true) or static
local function kq_queue(r, host, prio)
  if r then return K.RQUEUE_PFX .. host .. ':' .. prio end
  return K.QUEUE_PFX .. host .. ':' .. prio
end
local function kq_prios(r, host) if r then return K.RPRIOS_PFX .. host end return K.PRIOS_PFX .. host end
local function kq_pq(r, host) if r then return K.RPQ_PFX .. host end return K.PQ_PFX .. host end
local function kq_ready(r) if r then return K.RREADY end return K.READY end
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

-- arg_count checks that the call has exactly n arguments
local function arg_count(n)
  if #ARGV ~= n then fail('want ' .. n .. ' arguments, got ' .. #ARGV) end
end

-- int reads ARGV[i] as a whole number in [lo, hi]
local function int(i, lo, hi, what)
  local v = tonumber(ARGV[i])
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
-- unpack limit) and returns their values in order (false when absent)
local function hmget(key, fields)
  local out = {}
  for from = 1, #fields, 1000 do
    local got = redis.call('HMGET', key, unpack(fields, from, math.min(from + 999, #fields)))
    for k = 1, #got do out[from + k - 1] = got[k] end
  end
  return out
end
