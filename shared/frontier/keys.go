package frontier

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// Every Redis key of a crawl is built here. All of them share the hash tag
// {name}, so a crawl lives in one Redis Cluster slot and every function's
// keys are in that slot. The library's functions get the crawl prefix as
// ARGV[1] and build the fixed, per-host and per-bucket keys with the
// suffixes below, which library.go writes into the library's header, so
// the formats are defined in this file only.
//
//	crawl:{name}:finish        hash   idle_since, finished: the finish decision (written by the
//	                                  master only; a slave's heartbeat reads finished)
//	crawl:{name}:owner         string the master serving this shard, with a TTL (owner.go)
//	crawl:{name}:masters       zset   master id -> last seen (ms), shard 0 (owner.go)
//	crawl:{name}:meta          hash   layout (keyLayout: the key layout the crawl was made
//	                                  with), leaseseq, lib (the library the crawl's
//	                                  master loaded: library.go); strategy, dedup
//	                                  (exact or bloom) and with bloom bloom_m, bloom_k,
//	                                  bloom_seg, content_bits, all fixed when the crawl is
//	                                  created; shards and shard_tags (shard 0: placement.go);
//	                                  seen_level, seen_split, seen_count: the growing seen
//	                                  buckets' state (dedup.lua: LH), written
//	                                  by the functions that add URLs; wseq, the
//	                                  durable calls' write before WAIT (durable.go)
//	crawl:{name}:cfg           string the crawl's settings (settings.go): written by the
//	                                  master when it opens the crawl, read by the functions
//	crawl:{name}:stats         hash   queued, done, failed, seen, lost, retried, refused, ...
//	crawl:{name}:seen:<b>      set    fingerprint bucket b (hex): members = the top 56
//	                                  bits of 64-bit fingerprints, decimal (intset-encoded,
//	                                  8 bytes each); buckets grow in number with the crawl
//	                                  (dedup.lua: LH)
//	crawl:{name}:bloom:<s>     string Bloom filter segment s (decimal), bloom dedup mode
//	                                  only (instead of seen): bits s·bloom_seg ..
//	                                  (s+1)·bloom_seg-1 of the filter (bloom.go)
//	crawl:{name}:fresh         hash   host -> the first queued tasks (up to 4) of a host
//	                                  that has no queue of its own, nothing in flight
//	                                  and no next fetch time pending (bfs and dfs, static
//	                                  tasks), in claim order: entries <length>:prio \t
//	                                  depth \t hops \t attempt \t U, U the URL without its
//	                                  http(s):// and host (s or h, then the rest; = and
//	                                  the URL when it does not start with them). Such a
//	                                  host is claimable and in no ready set; a fifth task
//	                                  or a claim moves the rest to the host's own queue
//	                                  (queue.lua: push, FRESH). A claim walks the hash
//	                                  with HSCAN from where the last one stopped (a
//	                                  cursor in the library's memory: claim.lua)
//	crawl:{name}:q:<host>:<p>  list   tasks of one host at priority p, FIFO
//	crawl:{name}:qp:<host>     zset   priorities with a non-empty queue for host
//	crawl:{name}:ready         zset   hosts with queued tasks and a free slot,
//	                                  scored by next allowed fetch time (ms)
//	crawl:{name}:hnext         hash   host -> next allowed fetch time (ms); a host with
//	                                  nothing queued or in flight loses its hnext and
//	                                  hdelay fields once that time has passed (hcool)
//	crawl:{name}:hcool         zset   hosts with nothing queued or in flight whose next
//	                                  fetch time is pending, scored by it: a claim drops
//	                                  the politeness fields of those whose time passed
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
//	                                  channel of its versions (RulesChannel, not a key);
//	                                  crawl:{name}:work is the channel of work announcements
//	                                  (WorkChannel: seeds, wake-ups of waiting slaves)
//	crawl:{name}:s:<slave>:lease  zset  that slave's leases: url -> lease deadline (ms)
//	crawl:{name}:s:<slave>:ld  hash   that slave's lease data: url -> slave \t token \t
//	                                  leased_at \t host \t prio \t task
//	crawl:{name}:s:<slave>:hb  string that slave's last heartbeat: ms \t JSON (Redis's clock)
//	crawl:{name}:s:<slave>:ev  stream that slave's events (its functions' and Publish's), read
//	                                  by the master's sink with the crawl's own stream (Stream)
//	crawl:{name}:streams       set    the slave streams the sink reads (master only), so a
//	                                  retired slave's stream is drained before it is deleted
//	                                  The keys of a slave are written by its own Redis
//	                                  user only (acl.go): no slave can take, extend or ack
//	                                  another's lease. The master's user takes them back.
//	crawl:{name}:retry         zset   host \t prio \t task -> due time (ms)
//	crawl:{name}:failed        list   reason \t host \t prio \t task
//	crawl:{name}:scope:<b>     set    the seeds' host names (scope when allow_hosts is
//	                                  empty) as 52-bit fingerprints: b = the first 3 hex
//	                                  digits of the name's SHA-1, member = the next 13 as
//	                                  a decimal (intset-encoded, 8 bytes each: ScopeMember)
//	crawl:{name}:slaves        zset   slave id -> when it registered (ms): the registry the
//	                                  recoverer and the monitor walk. A slave adds itself
//	                                  (ZADD, its only right on this key); the master removes
//	                                  it. Liveness is the later of this score and its hb.
//	crawl:{name}:events        stream page, exception, slave, heartbeat and lost records: an
//	                                  entry holds one (type, data) or, written by a function,
//	                                  up to eventsPerEntry (t0, d0, t1, d1, ...; stream.go)
//	crawl:{name}:robots:<host> string fetched_at_ms \t status \t robots.txt body, with a
//	                                  TTL (PX)
//	crawl:{name}:content:<b>   hash   content fingerprint buckets: b = the top content_bits
//	                                  bits of Completion.ContentHash (hex, 2^12 buckets in a
//	                                  new crawl), field = its other bits (big-endian bytes),
//	                                  value = first URL
//	crawl:{name}:hpages        hash   host -> URLs enqueued (only with MaxPagesPerHost);
//	                                  field "\t" + host marks a host whose cap was reported.
//	                                  A host whose URLs wait in fresh without a field has
//	                                  counted its fresh entries: the field is written
//	                                  when a URL of it does not go to fresh or a claim
//	                                  takes one
//	crawl:{name}:qvar          hash   8-byte fingerprint of Task.PathKey -> URLs enqueued
//	                                  (only with MaxQueryVariants); for a Task.DateQuery
//	                                  the fingerprint, "d" and Options.MaxDateVariants
//	crawl:{name}:pq:<host>     zset   priority and aopic strategies: url -> -importance
//	                                  (priority: X·backlinks + Y·Task.Score; aopic: cash)
//	crawl:{name}:pqdata        hash   priority and aopic strategies: url -> depth \t hops \t attempt
//	crawl:{name}:control       hash   admin state (control.go): paused -> since (ms);
//	                                  drain:<slave> -> asked at (ms); retire:<proxy> -> asked
//	                                  at (ms), proxy being the redacted URL slaves report
//	crawl:{name}:sessions      hash   the dashboard's login sessions (sessions.go): epoch ->
//	                                  random, in every session cookie's MAC; r:<id> -> expiry
//	                                  (unix ms) of a session revoked by its logout. Shard 0
//	                                  only; the master and admin users may, a slave may not
//	crawl:{name}:limits        hash   shard 0 only, while the crawl has a limit (crawl.max_pages,
//	                                  max_items, max_duration: limits.go, lua/limits.lua):
//	                                  max_pages, max_items, timed (the master writes them);
//	                                  pages, the pages stored and in flight (taken for claims,
//	                                  less those no page came of), and items, the items the
//	                                  completions found (limit_take); over, a limit the
//	                                  master's clock reached; ended, the limit that ended the
//	                                  crawl
//	crawl:{name}:val           hash   url -> etag \t last_modified \t checksum: the validators
//	                                  of a page a recrawl re-enqueued (Task.Revisit), written
//	                                  by the reseed function and taken (HMGET, HDEL) by the
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
	Prefix    string
	Meta      string
	Stats     string
	Ready     string
	HostNext  string
	HostInfl  string
	HostDelay string
	Retry     string
	Failed    string
	// Fresh holds the first queued tasks of hosts with nothing else
	// (see above).
	Fresh string
	// Cool lists the idle hosts whose next fetch time is pending (see
	// above).
	Cool      string
	Slaves    string
	Events    string
	PQData    string
	HostPages string
	QueryVars string
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
	// Validators holds the validators of the pages a recrawl re-enqueued
	// until they are leased (recrawl.go).
	Validators   string
	RulesChannel string
	// WorkChannel carries work announcements (WorkMessage): seeds, and a
	// host made claimable while slaves wait (the functions' wake-ups). A
	// slave may publish there, and nowhere else. Not a key either.
	WorkChannel string
	// Streams is the set of slave event streams the sink reads (master
	// only): a retired slave's stream stays in it until drained.
	Streams string
	// Finish holds the finish decision's marks (written by the master
	// only: a slave's user cannot end the crawl; it reads the mark with
	// its heartbeat).
	Finish string
	// Settings holds the crawl's settings, which the functions read
	// (settings.go); the master writes it, a slave may only read it.
	Settings string
	// Owner names the master that serves this shard (a lease: owner.go);
	// Masters, in shard 0, the masters alive (master only).
	Owner, Masters string
	// Sessions holds the dashboard's login sessions (sessions.go); the
	// library's functions never touch it.
	Sessions string
	// Limits holds the crawl's page and item limits and their counts
	// (limits.go), shard 0 only.
	Limits string
}

// fixedKeys names the fixed keys once: the name the library's functions
// use (K.<name>: library.go writes them into its header), the key's suffix
// after the crawl prefix, and its field in Keys.
var fixedKeys = []struct {
	lua, suffix string
	field       func(*Keys) *string
}{
	{"META", "meta", func(k *Keys) *string { return &k.Meta }},
	{"STATS", "stats", func(k *Keys) *string { return &k.Stats }},
	{"READY", "ready", func(k *Keys) *string { return &k.Ready }},
	{"HNEXT", "hnext", func(k *Keys) *string { return &k.HostNext }},
	{"HINFL", "hinfl", func(k *Keys) *string { return &k.HostInfl }},
	{"HDELAY", "hdelay", func(k *Keys) *string { return &k.HostDelay }},
	{"RETRY", "retry", func(k *Keys) *string { return &k.Retry }},
	{"FAILED", "failed", func(k *Keys) *string { return &k.Failed }},
	{"FRESH", "fresh", func(k *Keys) *string { return &k.Fresh }},
	{"COOL", "hcool", func(k *Keys) *string { return &k.Cool }},
	{"SLAVES", "slaves", func(k *Keys) *string { return &k.Slaves }},
	{"EVENTS", "events", func(k *Keys) *string { return &k.Events }},
	{"PQDATA", "pqdata", func(k *Keys) *string { return &k.PQData }},
	{"HPAGES", "hpages", func(k *Keys) *string { return &k.HostPages }},
	{"QVAR", "qvar", func(k *Keys) *string { return &k.QueryVars }},
	{"RREADY", "rready", func(k *Keys) *string { return &k.RenderReady }},
	{"HCONC", "hconc", func(k *Keys) *string { return &k.HostConc }},
	{"HJITTER", "hjitter", func(k *Keys) *string { return &k.HostJitter }},
	{"HPDELAY", "hpdelay", func(k *Keys) *string { return &k.HostPDelay }},
	{"RULES", "rules", func(k *Keys) *string { return &k.Rules }},
	{"CONTROL", "control", func(k *Keys) *string { return &k.Control }},
	{"VAL", "val", func(k *Keys) *string { return &k.Validators }},
	{"STREAMS", "streams", func(k *Keys) *string { return &k.Streams }},
	{"FINISH", "finish", func(k *Keys) *string { return &k.Finish }},
	{"CFG", "cfg", func(k *Keys) *string { return &k.Settings }},
	{"OWNER", "owner", func(k *Keys) *string { return &k.Owner }},
	{"MASTERS", "masters", func(k *Keys) *string { return &k.Masters }},
	{"LIMITS", "limits", func(k *Keys) *string { return &k.Limits }},
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
	sfxScope   = "scope:"
)

// NewKeys returns the keys of a crawl.
func NewKeys(crawl string) Keys {
	p := "crawl:{" + crawl + "}:"
	k := Keys{Prefix: p, RulesChannel: p + "rules:changed", WorkChannel: p + "work",
		Sessions: p + "sessions"}
	for _, f := range fixedKeys {
		*f.field(&k) = p + f.suffix
	}
	return k
}

// CrawlPattern is the SCAN pattern of every key of a crawl, its other
// shards' (crawl:{name:k}:…, whatever their tags: placement.go) included:
// the name followed by the tag's end or a colon, which no name holds
// (ValidName), nor a glob character.
func CrawlPattern(crawl string) string { return "crawl:{" + crawl + "[}:]*" }

// SlaveLease returns the key of a slave's leases: a zset url -> deadline
// (ms). Only the slave's own Redis user may write it.
func (k Keys) SlaveLease(slave string) string { return k.Prefix + sfxSlave + slave + ":lease" }

// SlaveLeaseData returns the key of a slave's lease data: a hash url ->
// slave \t token \t leased_at \t host \t prio \t task.
func (k Keys) SlaveLeaseData(slave string) string { return k.Prefix + sfxSlave + slave + ":ld" }

// SlaveEvents returns the key of a slave's event stream: the events of the
// functions it calls and of its Publish calls. Its own user may only XADD to
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

// ScopeMember returns the key and member of a seed host name in the
// scope sets: the first 3 hex digits of its SHA-1 name the set, the next
// 13 (52 bits) are the member, in decimal (the library's scope_fp).
func (k Keys) ScopeMember(host string) (key, member string) {
	sum := sha1.Sum([]byte(host))
	h := hex.EncodeToString(sum[:])
	v, _ := strconv.ParseUint(h[3:16], 16, 64)
	return k.Prefix + sfxScope + h[:3], strconv.FormatUint(v, 10)
}

// RobotsHost returns the key of a host's robots.txt record.
func (k Keys) RobotsHost(host string) string { return k.Prefix + sfxRobots + host }

// all lists the keys every function call declares: only meta, which the master's
// and the slaves' Redis users may both read and write (Redis checks
// declared keys for read and write access), and which routes a call to
// the crawl's slot in a cluster.
func (k Keys) all() []string { return []string{k.Meta} }
