package frontier

import (
	"fmt"
	"strconv"
)

// Every Redis key of a crawl is built here. All of them share the hash tag
// {name}, so a crawl lives in one Redis Cluster slot and every script's keys
// are in that slot. Scripts get the crawl prefix as ARGV[1] and build the
// per-host and per-bucket keys with the suffixes below (luaPrelude), so the
// formats are defined in this file only.
//
//	crawl:{name}:meta          hash   seen_bits, leaseseq, idle_since, finished
//	crawl:{name}:stats         hash   queued, done, failed, seen, lost, retried, ...
//	crawl:{name}:seen:<b>      hash   fingerprint buckets: field = low bytes of the
//	                                  64-bit fingerprint, value "" (listpack-encoded)
//	crawl:{name}:q:<host>:<p>  list   tasks of one host at priority p, FIFO
//	crawl:{name}:qp:<host>     zset   priorities with a non-empty queue for host
//	crawl:{name}:ready         zset   hosts with queued tasks and a free slot,
//	                                  scored by next allowed fetch time (ms)
//	crawl:{name}:hnext         hash   host -> next allowed fetch time (ms)
//	crawl:{name}:hinfl         hash   host -> requests in flight
//	crawl:{name}:hdelay        hash   host -> politeness delay override (ms)
//	crawl:{name}:lease         zset   url -> lease deadline (ms)
//	crawl:{name}:leasedata     hash   url -> slave \t token \t leased_at \t host \t prio \t task
//	crawl:{name}:retry         zset   host \t prio \t task -> due time (ms)
//	crawl:{name}:failed        list   reason \t host \t prio \t task
//	crawl:{name}:scopehosts    set    host names of the seeds (scope when allow_hosts is empty)
//	crawl:{name}:slaves        zset   slave id -> last heartbeat (ms)
//	crawl:{name}:slaveinfo     hash   slave id -> last heartbeat JSON
//	crawl:{name}:events        stream page, exception, slave, heartbeat and lost records
//	crawl:{name}:robots        hash   host -> fetched_at_ms \t status \t robots.txt body
//
// A task string is depth \t hops \t attempt \t url: a queued URL costs its
// length plus a few bytes.
type Keys struct {
	Prefix     string
	Meta       string
	Stats      string
	Ready      string
	HostNext   string
	HostInfl   string
	HostDelay  string
	Lease      string
	LeaseData  string
	Retry      string
	Failed     string
	ScopeHosts string
	Slaves     string
	SlaveInfo  string
	Events     string
	Robots     string
}

const (
	sfxSeen  = "seen:"
	sfxQueue = "q:"
	sfxPrios = "qp:"
)

// NewKeys returns the keys of a crawl.
func NewKeys(crawl string) Keys {
	p := "crawl:{" + crawl + "}:"
	return Keys{
		Prefix:     p,
		Meta:       p + "meta",
		Stats:      p + "stats",
		Ready:      p + "ready",
		HostNext:   p + "hnext",
		HostInfl:   p + "hinfl",
		HostDelay:  p + "hdelay",
		Lease:      p + "lease",
		LeaseData:  p + "leasedata",
		Retry:      p + "retry",
		Failed:     p + "failed",
		ScopeHosts: p + "scopehosts",
		Slaves:     p + "slaves",
		SlaveInfo:  p + "slaveinfo",
		Events:     p + "events",
		Robots:     p + "robots",
	}
}

// Seen returns the key of a fingerprint bucket.
func (k Keys) Seen(bucket uint32) string {
	return k.Prefix + sfxSeen + strconv.FormatUint(uint64(bucket), 16)
}

// Queue returns the key of a host's queue at one priority.
func (k Keys) Queue(host string, prio int64) string {
	return k.Prefix + sfxQueue + host + ":" + strconv.FormatInt(prio, 10)
}

// Prios returns the key of a host's set of non-empty priorities.
func (k Keys) Prios(host string) string { return k.Prefix + sfxPrios + host }

// all lists the fixed keys, passed as KEYS to every script so that a
// cluster client routes the script to the crawl's slot.
func (k Keys) all() []string {
	return []string{k.Meta, k.Stats, k.Ready, k.HostNext, k.HostInfl, k.HostDelay,
		k.Lease, k.LeaseData, k.Retry, k.Failed, k.ScopeHosts, k.Slaves, k.SlaveInfo, k.Events}
}

// luaPrelude names the fixed keys (KEYS in the order of Keys.all) and the
// helpers every script shares. ARGV[1] is always the crawl prefix.
var luaPrelude = fmt.Sprintf(`
local P = ARGV[1]
local K_META, K_STATS, K_READY, K_HNEXT, K_HINFL, K_HDELAY = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local K_LEASE, K_LEASEDATA, K_RETRY, K_FAILED, K_SCOPE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_SLAVES, K_SLAVEINFO, K_EVENTS = KEYS[12], KEYS[13], KEYS[14]
local function k_seen(b) return P .. %q .. b end
local function k_queue(host, prio) return P .. %q .. host .. ':' .. prio end
local function k_prios(host) return P .. %q .. host end

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

-- lease data: slave \t token \t leased_at \t host \t prio \t task
local function lease_fields(data) return splitn(data, 6) end

-- task string: depth \t hops \t attempt \t url
local function task_url(task)
  return string.match(task, '^[^\t]*\t[^\t]*\t[^\t]*\t(.*)$')
end

local function emit(typ, data)
  redis.call('XADD', K_EVENTS, '*', 'type', typ, 'data', data)
end

-- make host claimable if it has queued tasks and a free slot
local function ready_host(host, conc)
  if redis.call('EXISTS', k_prios(host)) == 0 then
    redis.call('ZREM', K_READY, host)
    return
  end
  local infl = tonumber(redis.call('HGET', K_HINFL, host) or '0')
  if infl >= conc then
    redis.call('ZREM', K_READY, host)
    return
  end
  local nxt = tonumber(redis.call('HGET', K_HNEXT, host) or '0')
  redis.call('ZADD', K_READY, nxt, host)
end

-- work_added records that this script queued work (a task or a retry):
-- reopen() then restarts the finish window and clears a finished flag,
-- once per script rather than once per task
local work_added = false
local function reopen()
  if work_added then redis.call('HDEL', K_META, 'idle_since', 'finished') end
end

-- enqueue a task on its host; front puts it first among its priority
local function push(host, prio, task, conc, front)
  local q = k_queue(host, prio)
  if front then redis.call('LPUSH', q, task) else redis.call('RPUSH', q, task) end
  redis.call('ZADD', k_prios(host), prio, prio)
  redis.call('HINCRBY', K_STATS, 'queued', 1)
  work_added = true
  local infl = tonumber(redis.call('HGET', K_HINFL, host) or '0')
  if infl < conc and redis.call('ZSCORE', K_READY, host) == false then
    local nxt = tonumber(redis.call('HGET', K_HNEXT, host) or '0')
    redis.call('ZADD', K_READY, nxt, host)
  end
end

-- a task came back from a lease or a retry: count the attempt and requeue
-- it, or fail it once attempts are used. Returns the new attempt and
-- whether it failed.
local function requeue_or_fail(host, prio, task, conc, max_attempts, reason, now, crawl, slave)
  local f = splitn(task, 4)
  local attempt = tonumber(f[3]) + 1
  local url = task_url(task)
  local nt = f[1] .. '\t' .. f[2] .. '\t' .. attempt .. '\t' .. url
  if attempt >= max_attempts then
    redis.call('RPUSH', K_FAILED, reason .. '\t' .. host .. '\t' .. prio .. '\t' .. nt)
    redis.call('HINCRBY', K_STATS, 'failed', 1)
    emit('exception', cjson.encode({crawl = crawl, kind = 'failed', url = url, host = host,
      slave = slave, attempt = attempt, status = 0,
      message = 'gave up after ' .. attempt .. ' attempts: ' .. reason, at = now}))
    return attempt, true
  end
  return attempt, false, nt
end

-- release a host slot after a lease ends
local function host_done(host)
  local infl = redis.call('HINCRBY', K_HINFL, host, -1)
  if infl <= 0 then redis.call('HDEL', K_HINFL, host) end
end
`, sfxSeen, sfxQueue, sfxPrios)
