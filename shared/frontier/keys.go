package frontier

import (
	"fmt"
	"strconv"
	"strings"
)

// Every Redis key of a crawl is built here. All of them share the hash tag
// {name}, so a crawl lives in one Redis Cluster slot and every script's keys
// are in that slot. Scripts get the crawl prefix as ARGV[1] and build the
// per-host and per-bucket keys with the suffixes below (luaPrelude), so the
// formats are defined in this file only.
//
//	crawl:{name}:finish        hash   idle_since, finished: the finish decision (master only)
//	crawl:{name}:owner         string the master serving this shard, with a TTL (owner.go)
//	crawl:{name}:masters       zset   master id -> last seen (ms), shard 0 (owner.go)
//	crawl:{name}:meta          hash   seen_bits, leaseseq; dedup
//	                                  (exact or bloom) and with bloom bloom_m, bloom_k,
//	                                  bloom_seg, all fixed when the crawl is created;
//	                                  content_bits (content buckets, fixed: absent in
//	                                  crawls created before, whose seen_bits it is);
//	                                  seen_level, seen_split, seen_count: the growing seen
//	                                  buckets' state (seen_bits 0; luaPrelude: LH), written
//	                                  by the scripts that add URLs
//	crawl:{name}:stats         hash   queued, done, failed, seen, lost, retried, ...
//	crawl:{name}:seen:<b>      set    fingerprint bucket b (hex): members = the top 56
//	                                  bits of 64-bit fingerprints, decimal (intset-encoded,
//	                                  8 bytes each); buckets grow in number with the crawl
//	                                  (luaPrelude: LH). In a crawl created before they grew
//	                                  (meta seen_bits 8-24): a hash, field = low bytes of
//	                                  the fingerprint, value "", fixed bucket count
//	crawl:{name}:bloom:<s>     string Bloom filter segment s (decimal), bloom dedup mode
//	                                  only (instead of seen): bits s·bloom_seg ..
//	                                  (s+1)·bloom_seg-1 of the filter (bloom.go)
//	crawl:{name}:q:<host>:<p>  list   tasks of one host at priority p, FIFO
//	crawl:{name}:qp:<host>     zset   priorities with a non-empty queue for host
//	crawl:{name}:ready         zset   hosts with queued tasks and a free slot,
//	                                  scored by next allowed fetch time (ms)
//	crawl:{name}:hnext         hash   host -> next allowed fetch time (ms)
//	crawl:{name}:hinfl         hash   host -> requests in flight
//	crawl:{name}:hdelay        hash   host -> politeness delay from the slaves (ms):
//	                                  robots.txt Crawl-delay, autothrottle (Completion.HostDelay)
//	crawl:{name}:hpdelay       hash   host -> politeness delay of the rule files' HostPolicy (ms)
//	crawl:{name}:hjitter       hash   host -> jitter of the rule files' HostPolicy
//	crawl:{name}:hconc         hash   host -> concurrency of the rule files' HostPolicy
//	crawl:{name}:rq:<host>:<p> list   render tasks (Task.Render) of one host at priority p
//	crawl:{name}:rqp:<host>    zset   priorities with a non-empty render queue for host
//	crawl:{name}:rpq:<host>    zset   render tasks, priority and aopic strategies (as pq)
//	crawl:{name}:rready        zset   hosts with queued render tasks and a free slot,
//	                                  scored by next allowed fetch time (ms), like ready
//	crawl:{name}:rules         hash   version, blob: the rule set the master published
//	                                  (PutRules); crawl:{name}:rules:changed is the pub/sub
//	                                  channel of its versions (RulesChannel, not a key)
//	crawl:{name}:s:<slave>:lease  zset  that slave's leases: url -> lease deadline (ms)
//	crawl:{name}:s:<slave>:ld  hash   that slave's lease data: url -> slave \t token \t
//	                                  leased_at \t host \t prio \t task
//	crawl:{name}:s:<slave>:hb  string that slave's last heartbeat: ms \t JSON (Redis's clock)
//	crawl:{name}:s:<slave>:ev  stream that slave's events (its scripts' and Publish's), read
//	                                  by the master's sink with the crawl's own stream (Stream)
//	crawl:{name}:streams       set    the slave streams the sink reads (master only), so a
//	                                  retired slave's stream is drained before it is deleted
//	                                  The keys of a slave are written by its own Redis
//	                                  user only (acl.go): no slave can take, extend or ack
//	                                  another's lease. The master's user takes them back.
//	crawl:{name}:retry         zset   host \t prio \t task -> due time (ms)
//	crawl:{name}:failed        list   reason \t host \t prio \t task
//	crawl:{name}:scopehosts    set    host names of the seeds (scope when allow_hosts is empty)
//	crawl:{name}:slaves        zset   slave id -> when it registered (ms): the registry the
//	                                  recoverer and the monitor walk. A slave adds itself
//	                                  (ZADD, its only right on this key); the master removes
//	                                  it. Liveness is the later of this score and its hb.
//	crawl:{name}:lease, leasedata, slaveinfo: the crawl-wide lease and heartbeat keys of
//	                                  older versions; the recoverer still empties them
//	crawl:{name}:events        stream page, exception, slave, heartbeat and lost records: an
//	                                  entry holds one (type, data) or, written by a script,
//	                                  up to eventsPerEntry (t0, d0, t1, d1, ...; stream.go)
//	crawl:{name}:robots:<host> string fetched_at_ms \t status \t robots.txt body, with a
//	                                  TTL (PX); the hash crawl:{name}:robots of older
//	                                  versions is no longer read
//	crawl:{name}:content:<b>   hash   content fingerprint buckets: b = the top content_bits
//	                                  bits of Completion.ContentHash (hex, 2^12 buckets in a
//	                                  new crawl), field = its other bits (big-endian bytes),
//	                                  value = first URL
//	crawl:{name}:hpages        hash   host -> URLs enqueued (only with MaxPagesPerHost);
//	                                  field "\t" + host marks a host whose cap was reported
//	crawl:{name}:qvar          hash   8-byte fingerprint of Task.PathKey -> URLs enqueued
//	                                  (only with MaxQueryVariants); for a Task.DateQuery
//	                                  the fingerprint, "d" and Options.MaxDateVariants
//	crawl:{name}:pq:<host>     zset   priority and aopic strategies: url -> -importance
//	                                  (priority: X·backlinks + Y·Task.Score; aopic: cash)
//	crawl:{name}:pqdata        hash   priority and aopic strategies: url -> depth \t hops \t attempt
//	crawl:{name}:control       hash   admin state (control.go): paused -> since (ms);
//	                                  drain:<slave> -> asked at (ms); retire:<proxy> -> asked
//	                                  at (ms), proxy being the redacted URL slaves report
//	crawl:{name}:seeds         set    legacy, shard 0 only: the seed URLs (canonical) of
//	                                  versions before the MySQL table seeds (00008_seeds.sql),
//	                                  ~104 bytes of Redis per seed. Nothing adds to it now:
//	                                  the master moves its members into MySQL the first time
//	                                  a master, seed or recrawl opens the crawl
//	                                  (MoveLegacySeeds: SSCAN, record, SREM; the set goes with
//	                                  its last member). The master and admin users may.
//	crawl:{name}:val           hash   url -> etag \t last_modified \t checksum: the validators
//	                                  of a page a recrawl re-enqueued (Task.Revisit), written
//	                                  by the reseed script and taken (HMGET, HDEL) by the
//	                                  claim that leases the URL (recrawl.go)
//
// A task string is depth \t hops \t attempt \t url, with depth prefixed by
// "r" for a render task (Task.Render): a queued URL costs its length plus a
// few bytes with bfs and dfs, one more for a render task.
//
// Politeness is per real host whatever the class: a host's static queues
// (q, qp, pq; ready) and render queues (rq, rqp, rpq; rready) share its
// hnext, hinfl and delay, jitter and concurrency, so a site sees the same
// politeness whoever fetches it. A host's effective delay is the larger of
// hdelay and hpdelay when both are set, either one when one is set, else
// Options.Delay. With priority and aopic a queued
// URL is stored twice (pq member and pqdata field) with a double score: about
// twice its length plus 150 bytes, 220 bytes more than bfs for a 69-byte URL
// (BenchmarkQueuedMemory).
//
// meta also holds strategy (fixed when the crawl is created) and, with aopic,
// aopic_lambda (the virtual lambda page's cash).
type Keys struct {
	Prefix     string
	Meta       string
	Stats      string
	Ready      string
	HostNext   string
	HostInfl   string
	HostDelay  string
	Retry      string
	Failed     string
	ScopeHosts string
	Slaves     string
	Events     string
	Robots     string // hash of older versions, no longer used: see RobotsHost
	PQData     string
	HostPages  string
	QueryVars  string
	// RenderReady, HostConc, HostJitter and HostPDelay: render tasks and
	// per-host policies (see above).
	RenderReady string
	HostConc    string
	HostJitter  string
	HostPDelay  string
	// Rules is the published rule set; RulesChannel, the channel of its
	// versions, is not a key but carries the crawl's hash tag.
	Rules string
	// Control holds admin state (pause, drains, retired proxies)
	// (control.go).
	Control string
	// LegacySeeds is the seed URL set of versions before the MySQL seeds
	// table: nothing writes it, MoveLegacySeeds empties it.
	LegacySeeds string
	// Validators holds the validators of the pages a recrawl re-enqueued
	// until they are leased (recrawl.go).
	Validators   string
	RulesChannel string
	// Streams is the set of slave event streams the sink reads (master
	// only): a retired slave's stream stays in it until drained.
	Streams string
	// Finish holds the finish decision's marks (master only: a slave's
	// user cannot end the crawl).
	Finish string
	// Owner names the master that serves this shard (a lease: owner.go);
	// Masters, in shard 0, the masters alive (master only).
	Owner, Masters string
	// LegacyLease and LegacyLeaseData are the crawl-wide lease keys of
	// versions before per-slave leases: the recoverer still takes back
	// what they hold, nothing writes them.
	LegacyLease     string
	LegacyLeaseData string
	// LegacySlaveInfo is the crawl-wide heartbeat hash of those versions:
	// a retired slave's field is removed.
	LegacySlaveInfo string
}

// fixedKeys names the fixed keys once: the Lua variable the prelude binds
// (luaFixedKeys), the key's suffix after the crawl prefix, and its field
// in Keys.
var fixedKeys = []struct {
	lua, suffix string
	field       func(*Keys) *string
}{
	{"K_META", "meta", func(k *Keys) *string { return &k.Meta }},
	{"K_STATS", "stats", func(k *Keys) *string { return &k.Stats }},
	{"K_READY", "ready", func(k *Keys) *string { return &k.Ready }},
	{"K_HNEXT", "hnext", func(k *Keys) *string { return &k.HostNext }},
	{"K_HINFL", "hinfl", func(k *Keys) *string { return &k.HostInfl }},
	{"K_HDELAY", "hdelay", func(k *Keys) *string { return &k.HostDelay }},
	{"K_RETRY", "retry", func(k *Keys) *string { return &k.Retry }},
	{"K_FAILED", "failed", func(k *Keys) *string { return &k.Failed }},
	{"K_SCOPE", "scopehosts", func(k *Keys) *string { return &k.ScopeHosts }},
	{"K_SLAVES", "slaves", func(k *Keys) *string { return &k.Slaves }},
	{"K_EVENTS", "events", func(k *Keys) *string { return &k.Events }},
	{"K_PQDATA", "pqdata", func(k *Keys) *string { return &k.PQData }},
	{"K_HPAGES", "hpages", func(k *Keys) *string { return &k.HostPages }},
	{"K_QVAR", "qvar", func(k *Keys) *string { return &k.QueryVars }},
	{"K_RREADY", "rready", func(k *Keys) *string { return &k.RenderReady }},
	{"K_HCONC", "hconc", func(k *Keys) *string { return &k.HostConc }},
	{"K_HJITTER", "hjitter", func(k *Keys) *string { return &k.HostJitter }},
	{"K_HPDELAY", "hpdelay", func(k *Keys) *string { return &k.HostPDelay }},
	{"K_RULES", "rules", func(k *Keys) *string { return &k.Rules }},
	{"K_CONTROL", "control", func(k *Keys) *string { return &k.Control }},
	{"K_LEGACY_SEEDS", "seeds", func(k *Keys) *string { return &k.LegacySeeds }},
	{"K_VAL", "val", func(k *Keys) *string { return &k.Validators }},
	{"K_STREAMS", "streams", func(k *Keys) *string { return &k.Streams }},
	{"K_FINISH", "finish", func(k *Keys) *string { return &k.Finish }},
	{"K_OWNER", "owner", func(k *Keys) *string { return &k.Owner }},
	{"K_MASTERS", "masters", func(k *Keys) *string { return &k.Masters }},
	{"K_LEGACY_LEASE", "lease", func(k *Keys) *string { return &k.LegacyLease }},
	{"K_LEGACY_LEASEDATA", "leasedata", func(k *Keys) *string { return &k.LegacyLeaseData }},
	{"K_LEGACY_SLAVEINFO", "slaveinfo", func(k *Keys) *string { return &k.LegacySlaveInfo }},
}

// luaFixedKeys binds the fixed keys' Lua variables from the prefix P.
// Scripts declare only the meta key as KEYS (for routing and the ACL check
// of declared keys); every other key they touch is built from P, and Redis
// checks each command against the caller's ACL (acl.go).
func luaFixedKeys() string {
	var b strings.Builder
	for _, f := range fixedKeys {
		fmt.Fprintf(&b, "local %s = P .. %q\n", f.lua, f.suffix)
	}
	return b.String()
}

const (
	sfxSeen    = "seen:"
	sfxQueue   = "q:"
	sfxPrios   = "qp:"
	sfxPQ      = "pq:"
	sfxContent = "content:"
	sfxRobots  = "robots:"
	sfxRQueue  = "rq:"
	sfxRPrios  = "rqp:"
	sfxRPQ     = "rpq:"
	sfxBloom   = "bloom:"
	sfxSlave   = "s:"
)

// NewKeys returns the keys of a crawl.
func NewKeys(crawl string) Keys {
	p := "crawl:{" + crawl + "}:"
	k := Keys{Prefix: p, Robots: p + "robots", RulesChannel: p + "rules:changed"}
	for _, f := range fixedKeys {
		*f.field(&k) = p + f.suffix
	}
	return k
}

// SlaveLease returns the key of a slave's leases: a zset url -> deadline
// (ms). Only the slave's own Redis user may write it.
func (k Keys) SlaveLease(slave string) string { return k.Prefix + sfxSlave + slave + ":lease" }

// SlaveLeaseData returns the key of a slave's lease data: a hash url ->
// slave \t token \t leased_at \t host \t prio \t task.
func (k Keys) SlaveLeaseData(slave string) string { return k.Prefix + sfxSlave + slave + ":ld" }

// SlaveEvents returns the key of a slave's event stream: the events of the
// scripts it runs and of its Publish calls. Its own user may only XADD to
// it; the master's sink reads every slave's stream (Stream).
func (k Keys) SlaveEvents(slave string) string { return k.Prefix + sfxSlave + slave + ":ev" }

// SlaveBeat returns the key of a slave's last heartbeat: a string
// ms \t heartbeat JSON, ms being Redis's clock.
func (k Keys) SlaveBeat(slave string) string { return k.Prefix + sfxSlave + slave + ":hb" }

// Seen returns the key of a fingerprint bucket.
func (k Keys) Seen(bucket uint32) string {
	return k.Prefix + sfxSeen + strconv.FormatUint(uint64(bucket), 16)
}

// Bloom returns the key of a Bloom filter segment.
func (k Keys) Bloom(segment uint64) string {
	return k.Prefix + sfxBloom + strconv.FormatUint(segment, 10)
}

// Queue returns the key of a host's queue at one priority.
func (k Keys) Queue(host string, prio int64) string {
	return k.Prefix + sfxQueue + host + ":" + strconv.FormatInt(prio, 10)
}

// RenderQueue returns the key of a host's render queue at one priority.
func (k Keys) RenderQueue(host string, prio int64) string {
	return k.Prefix + sfxRQueue + host + ":" + strconv.FormatInt(prio, 10)
}

// RenderPrios returns the key of a host's set of non-empty render
// priorities.
func (k Keys) RenderPrios(host string) string { return k.Prefix + sfxRPrios + host }

// RenderPQ returns the key of a host's importance-ordered render queue.
func (k Keys) RenderPQ(host string) string { return k.Prefix + sfxRPQ + host }

// Prios returns the key of a host's set of non-empty priorities.
func (k Keys) Prios(host string) string { return k.Prefix + sfxPrios + host }

// PQ returns the key of a host's importance-ordered queue (priority and
// aopic strategies).
func (k Keys) PQ(host string) string { return k.Prefix + sfxPQ + host }

// Content returns the key of a content fingerprint bucket.
func (k Keys) Content(bucket uint32) string {
	return k.Prefix + sfxContent + strconv.FormatUint(uint64(bucket), 16)
}

// RobotsHost returns the key of a host's robots.txt record.
func (k Keys) RobotsHost(host string) string { return k.Prefix + sfxRobots + host }

// all lists the keys every script declares: only meta, which the master's
// and the slaves' Redis users may both read and write (Redis checks
// declared keys for read and write access), and which routes a script to
// the crawl's slot in a cluster.
func (k Keys) all() []string { return []string{k.Meta} }

// luaPrelude names the fixed keys (built from the prefix: luaFixedKeys) and the
// helpers every script shares. ARGV[1] is always the crawl prefix and the
// last ARGV is always the strategy config (Redis.cfg):
//
//	strategy \t jitter_dist \t prio_x \t aopic_tax \t aopic_lambda_min \t
//	max_pages_per_host \t max_query_variants \t host_concurrency \t
//	delay_ms \t jitter \t dedup \t bloom_m \t bloom_k \t bloom_seg \t
//	seen_load
//
// (bloom_m, bloom_k and bloom_seg are 0 with exact dedup; seen_load, the
// growing seen buckets' load, is 0 in a crawl whose seen buckets have a
// fixed layout: redis.go, seenLoad).
// host_concurrency, delay_ms and jitter are the crawl's defaults: scripts
// read a host's own values through host_conc, host_delay and host_jitter.
//
// A link or seed tuple is tupleLen ARGV: bucket, field, host, scope_host,
// prio, task, qvar (the 8-byte path-key fingerprint, "" for none); bucket
// and field are the fingerprint's (shard.slot: with growing buckets its
// low 32 bits and top 56 bits, from which LH picks the bucket), with bloom
// dedup the URL's a and b (bloom.go), and seen_add checks and sets either
// structure. prio is
// the list priority with bfs and dfs, and the pq score (-importance) with
// priority and aopic; lease data, retry and failed entries carry it the same
// way, so every requeue (push) goes back into the strategy's structure.
//
// The --[[mark:name]] and --[[profile:...]] comments cost nothing: the
// section profile (BenchmarkScriptSections) runs copies of the claim and
// complete scripts in which each becomes a timer, and a mark names the
// section that ends there.
var luaPrelude = fmt.Sprintf(`
--[[profile:start]]
local P = ARGV[1]
-- the crawl's name, from its prefix crawl:{name}:
local CRAWL = string.match(P, '^crawl:{(.-)}:')
%s-- a slave's own keys (Keys.SlaveLease, SlaveLeaseData, SlaveBeat): only
-- that slave's Redis user may write them (acl.go)
local function k_slease(s) return P .. %q .. s .. ':lease' end
local function k_sld(s) return P .. %q .. s .. ':ld' end
local function k_sbeat(s) return P .. %q .. s .. ':hb' end
local function k_sev(s) return P .. %q .. s .. ':ev' end
-- EV_KEY: the stream this script's events go to, the crawl's (the
-- master's scripts) or the calling slave's own (check_own sets it)
local EV_KEY = K_EVENTS
-- SLAVE: the script runs for a slave (check_own), whose Redis user may not
-- write the finish marks
local SLAVE = false
-- check_own fails the script before it writes anything unless the calling
-- Redis user may write slave s's own keys: a script that failed half way
-- would keep its first writes (a task popped from its queue and never
-- leased), so a slave whose id is not the one its ACL user was made for
-- loses nothing, it gets an error
local function check_own(s)
  if not redis.acl_check_cmd('HSET', k_sld(s), 'u', 'v') or not redis.acl_check_cmd('ZADD', k_slease(s), '0', 'u') then
    return redis.error_reply('NOPERM this Redis user may not write the keys of slave ' .. s ..
      ': is its slave.id the one its ACL user was made for (bin/master acl --role slave --slave ID)?')
  end
  EV_KEY = k_sev(s)
  SLAVE = true
end
local TUPLE = %d
local function k_seen(b) return P .. %q .. b end
local function k_queue(host, prio) return P .. %q .. host .. ':' .. prio end
local function k_prios(host) return P .. %q .. host end
local function k_pq(host) return P .. %q .. host end
local function k_content(b) return P .. %q .. b end
local function k_rqueue(host, prio) return P .. %q .. host .. ':' .. prio end
local function k_rprios(host) return P .. %q .. host end
local function k_rpq(host) return P .. %q .. host end
local function k_bloom(seg) return P .. %q .. seg end

-- the keys of a host's queues of one class: render (r true) or static
local function kq_queue(r, host, prio) if r then return k_rqueue(host, prio) end return k_queue(host, prio) end
local function kq_prios(r, host) if r then return k_rprios(host) end return k_prios(host) end
local function kq_pq(r, host) if r then return k_rpq(host) end return k_pq(host) end
local function kq_ready(r) if r then return K_RREADY end return K_READY end
-- the two classes, static (false) and render (true), for loops over both
local CLASSES = {false, true}

-- is_render: a render task's string starts with 'r' (its depth field)
local function is_render(task) return string.byte(task, 1) == 114 end

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

local CFG = splitn(ARGV[#ARGV], 15)
local STRATEGY, JITTER_DIST = CFG[1], CFG[2]
local PRIO_X, AOPIC_TAX, LAMBDA_MIN = tonumber(CFG[3]), tonumber(CFG[4]), tonumber(CFG[5])
local MAX_HOST_PAGES, MAX_QVAR = tonumber(CFG[6]), tonumber(CFG[7])
local DEF_CONC, DEF_DELAY, DEF_JITTER = tonumber(CFG[8]), tonumber(CFG[9]), tonumber(CFG[10])
local PQ = STRATEGY == 'priority' or STRATEGY == 'aopic'
local AOPIC = STRATEGY == 'aopic'
-- new tasks go to the front of their list with dfs (LIFO within a depth)
local NEW_FRONT = STRATEGY == 'dfs'
local BLOOM = CFG[11] == 'bloom'
local BLOOM_M, BLOOM_K, BLOOM_SEG = tonumber(CFG[12]), tonumber(CFG[13]), tonumber(CFG[14])

-- a URL's k Bloom bits are g = a, a+b, a+2b, ... (mod m), bit g being bit
-- g mod BLOOM_SEG of segment floor(g / BLOOM_SEG); a and b are below m, so
-- every sum is exact (bloom.go). Segment key names are built once per script
local bloom_keys = {}
local function bloom_key(seg)
  local key = bloom_keys[seg]
  if not key then
    key = k_bloom(seg)
    bloom_keys[seg] = key
  end
  return key
end

-- bloom_add sets a URL's k bits and reports whether one was 0 (the URL is
-- new): GETBIT up to the first 0, then SETBIT from there, so a seen URL
-- writes nothing and a new one costs at most k+1 calls
local function bloom_add(a, b)
  local g, new = a, false
  for _ = 1, BLOOM_K do
    local seg = math.floor(g / BLOOM_SEG)
    local key, off = bloom_key(seg), g - seg * BLOOM_SEG
    if new then
      redis.call('SETBIT', key, off, 1)
    elseif redis.call('GETBIT', key, off) == 0 then
      new = true
      redis.call('SETBIT', key, off, 1)
    end
    g = g + b
    if g >= BLOOM_M then g = g - BLOOM_M end
  end
  return new
end

-- Per-script caches. A script runs atomically, so what it read stays true
-- until it writes; every write to a cached structure goes through the
-- helpers below, which keep the cache equal to what Redis will hold. They
-- cut the commands a script runs per page (BenchmarkScriptCommands).
--
-- Writes to the per-host hashes and the ready sets are write-behind: they
-- change the cache at once and reach Redis at the end of the script
-- (finish), one HSET/HDEL per hash and one ZADD/ZREM per ready set, so a
-- batch of pages costs a few calls rather than a few per page. Nothing in a
-- script reads those structures from Redis after writing them except
-- through the cache; the claim flushes the ready sets (flush_ready) before
-- it reads a range of them.

-- call_chunked runs redis.call(cmd, key, args...) in chunks of at most 1000
-- args (Lua's unpack limit), a multiple of step (the args of one item)
local function call_chunked(cmd, key, args, step)
  local size = 1000 - 1000 %% step
  for from = 1, #args, size do
    redis.call(cmd, key, unpack(args, from, math.min(from + size - 1, #args)))
  end
end

-- Exact dedup's seen buckets grow with the crawl by linear hashing (crawls
-- created before that keep their fixed bucket count: LH.fixed, and a
-- tuple's x is its bucket). The seen table has a level b, a split pointer
-- s and a count n in meta (seen_level, seen_split, seen_count; absent:
-- LH.floor, 0, 0). A fingerprint's bucket is its low b bits, or its low
-- b+1 bits when those b are below s: a tuple's x is the low 32 bits and
-- its member y the top 56 bits, both decimal, so bucket and member keep
-- all 64 bits. When n passes LH.load × (2^b + s), bucket s is split: the
-- members whose fingerprint bit b is set move to bucket s + 2^b; s steps
-- on, and once it reaches 2^b the level goes up and s starts again at 0.
-- A bucket thus holds LH.load to 2 × LH.load members on average whatever
-- the crawl's size (redis.go: seenLoad), a set of integers (intset: 8
-- bytes a member). The state is read once per script (LH.state) and
-- written back by finish (LH.flush). One table LH holds it all: a script's
-- main function may have 200 locals at most.
local LH = {load = tonumber(CFG[15]) or 0, floor = %d, max = %d, pfx = k_seen('')}
LH.fixed = LH.load == 0
-- LH.state returns the seen table's state {b, p = 2^b, s, n, dirty,
-- split_dirty}, read from meta the first time a script asks
function LH.state()
  if not LH.st then
    local r = redis.call('HMGET', K_META, 'seen_level', 'seen_split', 'seen_count')
    local b = tonumber(r[1] or LH.floor)
    LH.st = {b = b, p = 2 ^ b, s = tonumber(r[2] or '0'), n = tonumber(r[3] or '0')}
  end
  return LH.st
end
-- LH.bucket_key returns the key of the seen bucket of a tuple's x
function LH.bucket_key(x)
  if LH.fixed then return LH.pfx .. x end
  local st = LH.st or LH.state()
  local lo = tonumber(x)
  local h = lo %% st.p
  if h < st.s then h = lo %% (2 * st.p) end
  return LH.pfx .. string.format('%%x', h)
end
-- LH.bit returns bit k of a member (decimal, below 2^56): a number's value
-- mod 2^(k+1) is that of its last k+1 digits (2^(k+1) divides 10^(k+1)),
-- exact in a double up to 15 digits, so k <= 14 (LH.max)
function LH.bit(m, k)
  return math.floor(tonumber(string.sub(m, -(k + 1))) / 2 ^ k) %% 2
end
-- LH.split moves the members of bucket s whose fingerprint bit b (member
-- bit b-8: LH.bit) is set to bucket s + 2^b. A bucket past 512
-- members (Redis's default set-max-intset-entries) may have left its
-- intset: it is emptied and written again, an intset once more.
function LH.split(st)
  local from = LH.pfx .. string.format('%%x', st.s)
  local to = LH.pfx .. string.format('%%x', st.s + st.p)
  local all = redis.call('SMEMBERS', from)
  local k = st.b - 8
  local move, keep = {}, {}
  for i = 1, #all do
    local m = all[i]
    if LH.bit(m, k) == 1 then
      move[#move + 1] = m
    else
      keep[#keep + 1] = m
    end
  end
  if #move > 0 then
    call_chunked('SADD', to, move, 1)
    if #all > 512 then
      call_chunked('SREM', from, all, 1)
      if #keep > 0 then call_chunked('SADD', from, keep, 1) end
    else
      call_chunked('SREM', from, move, 1)
    end
  end
  st.s = st.s + 1
  if st.s == st.p then
    st.b, st.p, st.s = st.b + 1, 2 * st.p, 0
  end
  st.split_dirty = true
end
-- LH.added counts a member added and splits a bucket when the table is
-- over its load
function LH.added()
  local st = LH.st or LH.state()
  st.n = st.n + 1
  st.dirty = true
  if st.n > LH.load * (st.p + st.s) and st.b < LH.max then LH.split(st) end
end
-- LH.flush writes the seen table's changed state to meta (from finish):
-- its count, and level and split pointer after a split
function LH.flush()
  local st = LH.st
  if not st or not st.dirty then return end
  if st.split_dirty then
    redis.call('HSET', K_META, 'seen_count', st.n, 'seen_level', st.b, 'seen_split', st.s)
  else
    redis.call('HSET', K_META, 'seen_count', st.n)
  end
  st.dirty, st.split_dirty = false, false
end

-- seen_add records a tuple's URL (x, y) as seen and reports whether it was
-- new: a member of a fingerprint bucket (a hash field with a fixed
-- layout), or the Bloom filter's bits (a and b: bloom.go)
local function seen_add(x, y)
  if BLOOM then return bloom_add(tonumber(x), tonumber(y)) end
  if LH.fixed then return redis.call('HSETNX', LH.pfx .. x, y, '') == 1 end
  if redis.call('SADD', LH.bucket_key(x), y) == 0 then return false end
  LH.added()
  return true
end

-- mark_dirty adds host to a dirty list d = {list, set}, once, in order
local function mark_dirty(d, host)
  if not d.set[host] then
    d.set[host] = true
    d.list[#d.list + 1] = host
  end
end

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
      sets[#sets + 1] = v
      sets[#sets + 1] = h
    else
      sets[#sets + 1] = h
      sets[#sets + 1] = v
    end
  end
  call_chunked(set_cmd, key, sets, 2)
  call_chunked(rem_cmd, key, rems, 1)
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

-- hcache[key][host]: a host's field of the politeness hashes (hinfl, hnext,
-- hdelay, hpdelay, hjitter, hconc), false when absent: read at most once
-- per script (hget, prefetch), written through the cache (hset, hdel,
-- hincr) and to Redis by flush_hashes
local hcache = {}
-- hdirty[key]: the hosts whose field this script changed, in order
local hdirty, hdirty_keys = {}, {}
-- the policy hashes are empty in most crawls: one EXISTS per script tells,
-- and then their fields are known absent until this script writes them
local POLICY = {[K_HPDELAY] = true, [K_HJITTER] = true, [K_HCONC] = true}
local policies_empty
local function hcache_of(key)
  local t = hcache[key]
  if not t then
    t = {}
    hcache[key] = t
  end
  return t
end
local function policies_known_empty()
  if policies_empty == nil then
    policies_empty = redis.call('EXISTS', K_HPDELAY, K_HJITTER, K_HCONC) == 0
  end
  return policies_empty
end
local function hget(key, host)
  local t = hcache_of(key)
  local v = t[host]
  if v == nil then
    if POLICY[key] and policies_known_empty() then
      v = false
    else
      v = redis.call('HGET', key, host) or false
    end
    t[host] = v
  end
  return v
end
-- prefetch reads the politeness fields of hosts (a list, repeats allowed)
-- that are not cached yet: one HMGET per hash instead of one HGET per host
local function prefetch(hosts)
  local keys = {K_HINFL, K_HNEXT, K_HDELAY}
  if not policies_known_empty() then
    keys[4], keys[5], keys[6] = K_HPDELAY, K_HJITTER, K_HCONC
  end
  for _, key in ipairs(keys) do
    local t = hcache_of(key)
    local want, seen = {}, {}
    for _, h in ipairs(hosts) do
      if t[h] == nil and not seen[h] then
        seen[h] = true
        want[#want + 1] = h
      end
    end
    for k, v in ipairs(hmget(key, want)) do t[want[k]] = v end
  end
end
local function hmark(key, host)
  local d = hdirty[key]
  if not d then
    d = {list = {}, set = {}}
    hdirty[key] = d
    hdirty_keys[#hdirty_keys + 1] = key
  end
  mark_dirty(d, host)
end
local function hset(key, host, v)
  hcache_of(key)[host] = v
  hmark(key, host)
end
local function hdel(key, host)
  hcache_of(key)[host] = false
  hmark(key, host)
end
local function hincr(key, host, d)
  local v = tonumber(hget(key, host) or '0') + d
  hcache_of(key)[host] = v
  hmark(key, host)
  return v
end
-- flush_hashes writes the changed fields: one HSET and one HDEL per hash
local function flush_hashes()
  for _, key in ipairs(hdirty_keys) do
    write_back(key, hdirty[key].list, hcache[key], 'HSET', 'HDEL', false)
  end
  hdirty, hdirty_keys = {}, {}
end

-- stats: the script's changes to the stats hash, written once per field at
-- its end (flush_stats, from finish): nothing in a script reads them
local stat_delta, stat_order = {}, {}
local function stat(field, d)
  if stat_delta[field] == nil then
    stat_delta[field] = 0
    stat_order[#stat_order + 1] = field
  end
  stat_delta[field] = stat_delta[field] + d
end
local function flush_stats()
  for _, field in ipairs(stat_order) do
    redis.call('HINCRBY', K_STATS, field, stat_delta[field])
  end
  stat_delta, stat_order = {}, {}
end

-- in_ready[r][host]: the host's score in the ready set of its class (r:
-- render), false when not in it; nil until this script read or wrote it.
-- Writes are write-behind (rdirty, flush_ready).
local in_ready = {[false] = {}, [true] = {}}
local rdirty = {[false] = {list = {}, set = {}}, [true] = {list = {}, set = {}}}
-- rready_empty: the render ready set was empty when first asked, so a host
-- not written since is not in it (most crawls never render)
local rready_empty
local function ready_score(r, host)
  local v = in_ready[r][host]
  if v == nil and r then
    if rready_empty == nil then rready_empty = redis.call('EXISTS', K_RREADY) == 0 end
    if rready_empty then v = false end
  end
  return v
end
local function ready_add(r, host, score)
  if ready_score(r, host) ~= score then
    in_ready[r][host] = score
    mark_dirty(rdirty[r], host)
  end
end
local function ready_rem(r, host)
  if ready_score(r, host) ~= false then
    in_ready[r][host] = false
    mark_dirty(rdirty[r], host)
  end
end
-- flush_ready writes the ready sets' changes: one ZADD and one ZREM per set
local function flush_ready()
  for _, r in ipairs(CLASSES) do
    if #rdirty[r].list > 0 then
      write_back(kq_ready(r), rdirty[r].list, in_ready[r], 'ZADD', 'ZREM', true)
      rdirty[r] = {list = {}, set = {}}
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
-- ready_seen records a score a script read from the ready set of class r
local function ready_seen(r, host, score) in_ready[r][host] = tonumber(score) end
-- in_ready_set reports whether host is in the ready set of class r
local function in_ready_set(r, host) return ready_zscore(r, host) ~= false end

-- has_queue[r][host]: whether the host has queued tasks of class r; push
-- sets it, a claim's pop forgets it (nil: ask Redis)
local has_queue = {[false] = {}, [true] = {}}
-- no_render: no render task was queued when first asked (the stats'
-- rqueued count, which finish relies on too), so a host this script did
-- not push a render task to has no render queue
local no_render
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
-- and the policy's (hpdelay) when both are set
local function host_conc(host)
  return tonumber(hget(K_HCONC, host) or DEF_CONC)
end
local function host_jitter(host)
  return tonumber(hget(K_HJITTER, host) or DEF_JITTER)
end
local function host_delay(host)
  local d = hget(K_HDELAY, host)
  local p = hget(K_HPDELAY, host)
  if d and p then return math.max(tonumber(d), tonumber(p)) end
  return tonumber(d or p or DEF_DELAY)
end
local function host_infl(host)
  return tonumber(hget(K_HINFL, host) or '0')
end
local function host_next(host)
  return tonumber(hget(K_HNEXT, host) or '0')
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

-- lease data: slave \t token \t leased_at \t host \t prio \t task
local function lease_fields(data)
  return {string.match(data, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')}
end

-- task string: depth \t hops \t attempt \t url
local function task_url(task)
  return string.match(task, '^[^\t]*\t[^\t]*\t[^\t]*\t(.*)$')
end

-- emit buffers an event; flush_events writes a script's events in stream
-- entries of up to EVENTS_PER_ENTRY events each: one event as the fields
-- type and data, several as t0, d0, t1, d1, ... (Stream.Read splits them
-- and numbers them: eventID)
local EVENTS_PER_ENTRY = %d
local ev_buf = {}
local function emit(typ, data)
  ev_buf[#ev_buf + 1] = typ
  ev_buf[#ev_buf + 1] = data
end
local function flush_events()
  local n = #ev_buf / 2
  if n == 1 then
    redis.call('XADD', EV_KEY, '*', 'type', ev_buf[1], 'data', ev_buf[2])
  elseif n > 1 then
    for from = 0, n - 1, EVENTS_PER_ENTRY do
      local args = {}
      for e = from, math.min(from + EVENTS_PER_ENTRY, n) - 1 do
        local i = e - from
        args[#args + 1] = 't' .. i
        args[#args + 1] = ev_buf[2 * e + 1]
        args[#args + 1] = 'd' .. i
        args[#args + 1] = ev_buf[2 * e + 2]
      end
      redis.call('XADD', EV_KEY, '*', unpack(args))
    end
  end
  ev_buf = {}
end

-- make host claimable in each class (ready, rready) where it has queued
-- tasks and a free slot; the slots and next time are the host's, shared
local function ready_host(host)
  local free = host_infl(host) < host_conc(host)
  for _, r in ipairs(CLASSES) do
    if free and queued(r, host) then
      ready_add(r, host, host_next(host))
    else
      ready_rem(r, host)
    end
  end
end

-- work_added records that this script queued work (a task or a retry):
-- finish() then restarts the finish window and clears a finished flag,
-- once per script rather than once per task
local work_added = false
-- finish ends every script that changes the queues: it writes the stats
-- and reopens the crawl when work was added
local function finish()
  --[[mark:finish_entry]]
  flush_hashes()
  --[[mark:flush_hashes]]
  flush_ready()
  --[[mark:flush_ready]]
  flush_stats()
  --[[mark:flush_stats]]
  flush_events()
  --[[mark:flush_events]]
  LH.flush()
  -- a slave adds work only while it holds a lease, and a crawl with a
  -- lease is neither idle nor finished: only the master's scripts (seeds,
  -- requeues, leases taken back) reopen it
  if work_added then
    if not SLAVE then redis.call('HDEL', K_FINISH, 'idle_since', 'finished') end
    -- the work counter a sharded crawl's finish decision compares
    -- (CheckFinished in sharded.go)
    redis.call('HINCRBY', K_META, 'workseq', 1)
  end
  --[[mark:flush_meta]]
  --[[profile:flush]]
end

-- enqueue a task on its host, in the queues of its class (render tasks in
-- rq/rqp/rpq, claimable from rready): bfs and dfs put it in the list of its
-- priority (front: first among its priority), priority and aopic in the
-- host's pq with score prio and its depth, hops and attempt in pqdata
local function push(host, prio, task, front)
  local r = is_render(task)
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
  if cur ~= v then
    hset(key, host, v)
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

-- set_policies applies np policies from ARGV[at] on, 4 ARGV each (host,
-- delay_ms, jitter, conc: policyArgs)
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
-- admit returns false and which cap
local function admit(host, qv, enforce)
  local counted = false
  if MAX_HOST_PAGES > 0 then
    local c = redis.call('HINCRBY', K_HPAGES, host, 1)
    if enforce and c > MAX_HOST_PAGES then
      redis.call('HINCRBY', K_HPAGES, host, -1)
      return false, 'host'
    end
    counted = true
  end
  -- a path key of a URL whose query holds a date carries its own cap
  -- after its 8 bytes (appendTuplesFP): calendars stop sooner
  local qcap = MAX_QVAR
  if #qv > 8 then qcap = tonumber(string.sub(qv, 10)) end
  if qcap > 0 and qv ~= '' then
    local c = redis.call('HINCRBY', K_QVAR, qv, 1)
    if enforce and c > qcap then
      redis.call('HINCRBY', K_QVAR, qv, -1)
      if counted then redis.call('HINCRBY', K_HPAGES, host, -1) end
      return false, 'qvar'
    end
  end
  return true
end

-- trap_drop counts a link dropped by a cap; the first drop by a host's page
-- cap records one trap exception for the host
local function trap_drop(host, task, why, crawl, slave, now)
  stat('trap_dropped', 1)
  if why == 'host' and redis.call('HSETNX', K_HPAGES, '\t' .. host, now) == 1 then
    emit('exception', cjson.encode({crawl = crawl, kind = 'trap', url = task_url(task), host = host,
      slave = slave, attempt = 0, status = 0,
      message = 'host page cap ' .. MAX_HOST_PAGES .. ' reached', at = now}))
  end
end

-- take_link puts the link tuple at ARGV[j] through scope (in_scope caches
-- SISMEMBER scopehosts), dedup and the trap caps. It returns 'new' for a
-- link seen now and admitted (counted in the stats' seen; the caller
-- queues it), 'old' for one seen before, and nil for one out of scope or
-- dropped by a cap (a trap_drop).
local function take_link(j, scope_by_seeds, in_scope, crawl, slave, now)
  local lhost, lscope = ARGV[j + 2], ARGV[j + 3]
  if scope_by_seeds then
    local ok_scope = in_scope[lscope]
    if ok_scope == nil then
      ok_scope = redis.call('SISMEMBER', K_SCOPE, lscope) == 1
      in_scope[lscope] = ok_scope
    end
    if not ok_scope then return nil end
  end
  if not seen_add(ARGV[j], ARGV[j + 1]) then return 'old' end
  local ok, why = admit(lhost, ARGV[j + 6], true)
  if not ok then
    trap_drop(lhost, ARGV[j + 5], why, crawl, slave, now)
    return nil
  end
  stat('seen', 1)
  return 'new'
end

-- a task came back from a lease or a retry: count the attempt and requeue
-- it, or fail it once attempts are used. Returns the new attempt and
-- whether it failed.
local function requeue_or_fail(host, prio, task, max_attempts, reason, now, crawl, slave)
  local f = splitn(task, 4)
  local attempt = tonumber(f[3]) + 1
  local url = task_url(task)
  local nt = f[1] .. '\t' .. f[2] .. '\t' .. attempt .. '\t' .. url
  if attempt >= max_attempts then
    redis.call('RPUSH', K_FAILED, reason .. '\t' .. host .. '\t' .. prio .. '\t' .. nt)
    stat('failed', 1)
    to_lambda(-tonumber(prio))
    emit('exception', cjson.encode({crawl = crawl, kind = 'failed', url = url, host = host,
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
--[[mark:prelude]]
`, luaFixedKeys(), sfxSlave, sfxSlave, sfxSlave, sfxSlave, tupleLen, sfxSeen, sfxQueue, sfxPrios, sfxPQ, sfxContent, sfxRQueue, sfxRPrios, sfxRPQ, sfxBloom, seenFloor, seenMaxLevel, eventsPerEntry)
