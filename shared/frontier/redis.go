package frontier

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Options configure a Redis frontier. Every process of a crawl must use the
// same values; they come from the shared config file.
type Options struct {
	Crawl string
	// Shards is the number of shards of a crawl (0 or 1: one). It is fixed
	// when the crawl is created: NewRedis fails on a crawl created with
	// another count (sharded.go).
	Shards int
	// Slave is the slave this frontier acts for, "" for a master: a
	// slave's Publish goes to its own event stream (Keys.SlaveEvents),
	// the only stream its Redis user may write.
	Slave           string
	Delay           time.Duration // politeness delay between request starts to one host
	Jitter          float64       // extra random delay, fraction of Delay
	HostConcurrency int           // requests in flight to one host across all slaves
	LeaseDuration   time.Duration
	MaxAttempts     int
	// ScopeBySeeds restricts links to the seeds' hosts (allow_hosts empty).
	ScopeBySeeds bool
	// ExpectedURLs sizes the Bloom filter (DedupMode "bloom") when the
	// crawl is created. Exact dedup's buckets grow with the crawl and do
	// not depend on it (crawls created before they grew keep the bucket
	// count it gave them).
	ExpectedURLs int64
	// DeadAfter is how old a heartbeat may be for a slave to count as alive.
	DeadAfter time.Duration

	// Strategy orders each host's queue; it is fixed when the crawl is
	// created (NewRedis fails on a crawl created with another one):
	//   - "" or "bfs": breadth-first, priority = Task.Priority (depth), FIFO;
	//   - "dfs": deepest first, priority = -depth, LIFO within a depth;
	//   - "priority": highest importance X·IB + Y·IL first, IB the number of
	//     times the URL was found while queued (backlinks), IL Task.Score;
	//   - "aopic": Adaptive On-line Page Importance Computation: every seed
	//     starts with cash 1; a completed page pays AOPICTax of its cash to
	//     a virtual lambda page and splits the rest equally among its
	//     out-links that are new or still queued (all of it goes to lambda
	//     when there are none, when its content is a duplicate or when it
	//     fails); the richest URL is claimed first. When lambda holds at
	//     least AOPICLambdaMin, a claim gives it back in equal shares to the
	//     best-ranked queued URL of each ready host (up to 64 hosts), so
	//     cash keeps flowing to pages with many in-links while trap chains,
	//     which only pass on ever-smaller shares, starve.
	Strategy string
	// PriorityX and PriorityY are X and Y of the priority strategy; both 0
	// means 1 and 1.
	PriorityX, PriorityY float64
	// AOPICTax is the share of a completed page's cash paid to lambda:
	// 0 means 0.1, a negative value means no tax.
	AOPICTax float64
	// AOPICLambdaMin is the lambda cash from which a claim gives it back;
	// 0 means 0.5.
	AOPICLambdaMin float64
	// JitterDist is the distribution of the politeness jitter: "" or
	// "uniform" (delay × (1 + Jitter × U[0,1))), "exponential" (delay ×
	// (1 + E), E exponential of mean Jitter capped at 5 × Jitter) or "none".
	JitterDist string
	// MaxPagesPerHost drops links to a host that already has that many URLs
	// enqueued in the crawl (seeds count but are never dropped); 0 = no cap.
	MaxPagesPerHost int64
	// MaxQueryVariants drops links whose Task.PathKey already has that many
	// URLs enqueued; 0 = no cap.
	MaxQueryVariants int
	// MaxDateVariants caps the links of one path key whose query holds a
	// date (Task.DateQuery: a calendar's next-day chain); 0 = such links
	// count as any query variant.
	MaxDateVariants int
	// RobotsTTL is how long PutRobots keeps a robots.txt record; 0 = 24h.
	RobotsTTL time.Duration
	// AllowHosts are crawl.allow_hosts in canonical form (urlx.Scope's
	// HostPatterns: "example.org", "*.example.org"): the functions refuse
	// a link to another host when the scope is not the seeds' hosts.
	AllowHosts []string
	// MaxDepth is crawl.max_depth: the functions refuse a deeper link; 0 =
	// unlimited.
	MaxDepth int
	// MaxHostDelay and MaxBackoff cap the host delay and the backoff a
	// slave reports with a completion (robots.txt Crawl-delay and
	// autothrottle; Retry-After and retry backoff), so no slave can hold a
	// host for longer; 0 = an hour.
	MaxHostDelay, MaxBackoff time.Duration

	// DedupMode is how seen URLs are remembered; it is fixed when the crawl
	// is created (NewRedis fails on a crawl created with another mode):
	//   - "" or "exact": 64-bit fingerprints in buckets that grow with the
	//     crawl (~8.5 bytes per URL at any size); two URLs are confused
	//     only when their fingerprints collide;
	//   - "bloom": a Bloom filter on Redis bitmaps sized for ExpectedURLs at
	//     FalsePositiveRate (~3.6 bytes per URL at 1e-6); a false positive
	//     takes a new URL for a seen one, so its page is silently skipped.
	//     The filter's size (bits m, hash functions k) is fixed in meta when
	//     the crawl is created; past ExpectedURLs its rate grows.
	DedupMode string
	// FalsePositiveRate is the Bloom filter's false-positive rate at
	// ExpectedURLs URLs, in (0, 0.5); 0 means 1e-6. Only with "bloom", and
	// only when the crawl is created.
	FalsePositiveRate float64
	// WaitReplicas is how many replicas must acknowledge the writes of a
	// completion, of links for another shard and of seeds before the call
	// returns (Redis WAIT), when the node has replicas (durable.go): what
	// a slave was told is done, and what its link cache remembers, then
	// survives a failover. 0 = none: writes are replicated asynchronously.
	WaitReplicas int
	// WaitTimeout bounds one wait for replicas; 0 = 1 s. A wait that
	// times out is counted (Redis.ReplicaLag) and the call goes on.
	WaitTimeout time.Duration
	// LinkCache is the number of slots (8 bytes each) of this process's
	// cache of links already put through the seen set, which Complete
	// then leaves out of its script call (bfs and dfs only: with priority
	// and aopic a link found again still counts); 0 = none.
	LinkCache int

	// seenLoad is the mean members per seen bucket at which the seen
	// table splits one (0: seenLoad); tests set a small one to grow a
	// crawl through many splits (export_test.go).
	seenLoad int
}

// Dedup modes (Options.DedupMode).
const (
	DedupExact = "exact"
	DedupBloom = "bloom"
)

// Crawl strategies (Options.Strategy).
const (
	StrategyBFS      = "bfs"
	StrategyDFS      = "dfs"
	StrategyPriority = "priority"
	StrategyAOPIC    = "aopic"
)

// Jitter distributions (Options.JitterDist).
const (
	JitterUniform     = "uniform"
	JitterExponential = "exponential"
	JitterNone        = "none"
)

// OptionsFromConfig derives frontier options from the config.
func OptionsFromConfig(c *config.Config) Options {
	return Options{
		Crawl:           c.Crawl.Name,
		Shards:          c.Crawl.Shards,
		Delay:           c.Politeness.Delay,
		Jitter:          c.Politeness.Jitter,
		HostConcurrency: c.Politeness.HostConcurrency,
		LeaseDuration:   c.Lease.Duration,
		MaxAttempts:     c.Lease.MaxAttempts,
		ScopeBySeeds:    len(c.Crawl.AllowHosts) == 0,
		ExpectedURLs:    c.Dedup.ExpectedURLs,
		DeadAfter:       c.Master.DeadAfter,

		Strategy:         c.Crawl.Strategy,
		PriorityX:        c.Crawl.PriorityBacklinks,
		PriorityY:        c.Crawl.PriorityURL,
		AOPICTax:         taxFromConfig(c.Crawl.AOPICTax),
		JitterDist:       c.Politeness.JitterDist,
		MaxPagesPerHost:  c.Crawl.MaxPagesPerHost,
		MaxQueryVariants: c.Crawl.MaxQueryVariants,
		MaxDateVariants:  c.Crawl.MaxDateVariants,
		RobotsTTL:        c.Politeness.RobotsTTL,
		AllowHosts:       allowHostPatterns(c.Crawl.AllowHosts),
		MaxDepth:         c.Crawl.MaxDepth,
		MaxHostDelay:     max(c.Politeness.MaxCrawlDelay, c.Politeness.AutoThrottleMaxDelay, c.Politeness.Delay),
		MaxBackoff:       c.Lease.RetryMax,

		DedupMode:         c.Dedup.Mode,
		FalsePositiveRate: c.Dedup.FalsePositiveRate,
		LinkCache:         c.Slave.LinkCache,
		WaitReplicas:      c.Redis.WaitReplicas,
		WaitTimeout:       c.Redis.WaitTimeout,
	}
}

// allowHostPatterns returns crawl.allow_hosts in canonical form (the
// config was validated: an entry urlx refuses is left out).
func allowHostPatterns(hosts []string) []string {
	if len(hosts) == 0 {
		return nil
	}
	sc, err := urlx.NewScope(hosts, nil, nil, 0)
	if err != nil {
		return nil
	}
	return sc.HostPatterns()
}

// taxFromConfig maps the config's tax, where 0 means none, to AOPICTax,
// where 0 means the default.
func taxFromConfig(t float64) float64 {
	if t == 0 {
		return -1
	}
	return t
}

// shard is one complete frontier under one hash tag: the whole crawl when
// it has one shard, else the hosts that hash to it (Redis, sharded.go).
type shard struct {
	rdb         redis.UniversalClient
	opt         Options
	keys        Keys
	allKeys     []string   // keys.all(), passed as KEYS to every function
	seenBits    uint       // number of seen bucket bits of a fixed layout (0: growing buckets), per crawl in meta
	contentBits uint       // number of content bucket bits, per crawl in meta
	bloom       bloomSize  // the Bloom filter's size, fixed per crawl in meta (bloom mode)
	links       *linkCache // nil: every link goes to the function (linkcache.go)
	// libFor, when set, picks the library a function is called from (the
	// section profile's instrumented copy: ProfileScripts in
	// export_test.go); nil in production
	libFor func(name string) *library
	// differ names the settings in which this slave's options differ from
	// the crawl's (the master's), which the functions use
	differ []string
	// index is the shard's number, tag what its event ids carry ("" for
	// shard 0, "~k" for shard k of a sharded crawl: stream.go)
	index int
	tag   string
	// wait is the crawl's waiting for replicas (durable.go); nil: none
	wait *replicaWait
	// contentKey keys the slots of scoped content hashes
	// (Completion.ContentScope: scopedContent), random per process
	contentKey [32]byte
	// lim is what this process knows of the crawl's limits (shard 0's
	// only: limits.go)
	lim limitState
}

var (
	_ Frontier   = (*Redis)(nil)
	_ Seeder     = (*Redis)(nil)
	_ Supervisor = (*Redis)(nil)
	_ Registry   = (*Redis)(nil)

	_ RenderClaimer   = (*Redis)(nil)
	_ CompleteClaimer = (*Redis)(nil)
	_ PolicySeeder    = (*Redis)(nil)
	_ RulesStore      = (*Redis)(nil)
)

// Exact dedup's seen buckets grow by linear hashing (luaPrelude: LH): a
// crawl starts with 2^seenFloor buckets per shard and splits one each time
// its count passes seenLoad per bucket, so its buckets hold seenLoad to
// 2·seenLoad URLs on average and a small crawl pays what a big one does per
// URL. A bucket is a set of integers (the fingerprint's top 56 bits),
// intset-encoded up to Redis's set-max-intset-entries (512 by default) at
// 8 bytes a member: seenLoad keeps the fullest buckets below that. Buckets
// stop splitting at level seenMaxLevel (2^23 buckets, about 1.6 billion
// URLs in a shard); past that they grow and leave their intset.
//
// Content buckets (Completion.ContentHash) have a fixed count, 2^contentBits
// per shard whatever the crawl's expected size: an entry holds a URL, so a
// bucket's own cost matters little, and beyond listpack size (128 entries,
// or any URL over 64 bytes: most) a bucket is a hash table whose lookups
// do not grow with it. Growing them as seen buckets grow would cost every
// page about 1.4 µs more of Redis time (their splits move URLs).
//
// A crawl's meta seen_bits says its seen layout: 0 for growing buckets; 8
// to 24, in crawls created before they grew, the fixed number of bucket
// bits that addresses hashes of fingerprint fields (FixedBucketBits in
// export_test.go), which those crawls' content buckets use too. Binaries
// of those versions refuse a crawl whose seen_bits is 0 rather than
// address it wrongly.
const (
	seenLoad     = 192
	seenFloor    = 8
	seenMaxLevel = 23
	contentBits  = 12
)

// normalize fills opt's defaults and checks its values.
func normalize(opt Options) (Options, bloomSize, error) {
	if opt.Crawl == "" {
		return opt, bloomSize{}, errors.New("new frontier: empty crawl name")
	}
	if opt.HostConcurrency < 1 {
		opt.HostConcurrency = 1
	}
	if opt.MaxAttempts < 1 {
		opt.MaxAttempts = 1
	}
	if opt.LeaseDuration <= 0 {
		opt.LeaseDuration = time.Minute
	}
	if opt.DeadAfter <= 0 {
		opt.DeadAfter = 10 * time.Second
	}
	if opt.Strategy == "" {
		opt.Strategy = StrategyBFS
	}
	switch opt.Strategy {
	case StrategyBFS, StrategyDFS, StrategyPriority, StrategyAOPIC:
	default:
		return opt, bloomSize{}, fmt.Errorf("new frontier: unknown strategy %q", opt.Strategy)
	}
	if opt.JitterDist == "" {
		opt.JitterDist = JitterUniform
	}
	switch opt.JitterDist {
	case JitterUniform, JitterExponential, JitterNone:
	default:
		return opt, bloomSize{}, fmt.Errorf("new frontier: unknown jitter distribution %q", opt.JitterDist)
	}
	if opt.PriorityX == 0 && opt.PriorityY == 0 {
		opt.PriorityX, opt.PriorityY = 1, 1
	}
	switch {
	case opt.AOPICTax == 0:
		opt.AOPICTax = 0.1
	case opt.AOPICTax < 0:
		opt.AOPICTax = 0
	case opt.AOPICTax >= 1:
		return opt, bloomSize{}, fmt.Errorf("new frontier: aopic tax %v must be below 1", opt.AOPICTax)
	}
	if opt.AOPICLambdaMin <= 0 {
		opt.AOPICLambdaMin = 0.5
	}
	if opt.RobotsTTL <= 0 {
		opt.RobotsTTL = 24 * time.Hour
	}
	if opt.MaxHostDelay <= 0 {
		opt.MaxHostDelay = defaultMaxHostDelay
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = defaultMaxBackoff
	}
	if opt.DedupMode == "" {
		opt.DedupMode = DedupExact
	}
	var want bloomSize
	switch opt.DedupMode {
	case DedupExact:
	case DedupBloom:
		if opt.FalsePositiveRate == 0 {
			opt.FalsePositiveRate = 1e-6
		}
		if !(opt.FalsePositiveRate > 0 && opt.FalsePositiveRate < 0.5) {
			return opt, bloomSize{}, fmt.Errorf("new frontier: false positive rate %v must be in (0, 0.5)", opt.FalsePositiveRate)
		}
		var err error
		if want, err = newBloomSize(opt.ExpectedURLs, opt.FalsePositiveRate); err != nil {
			return opt, bloomSize{}, fmt.Errorf("new frontier: %w", err)
		}
	default:
		return opt, bloomSize{}, fmt.Errorf("new frontier: unknown dedup mode %q", opt.DedupMode)
	}
	return opt, want, nil
}

// newShard opens one shard of a crawl under keys; opt is normalized, and
// want is the Bloom filter's size for a new crawl (bloom mode).
func newShard(ctx context.Context, rdb redis.UniversalClient, opt Options, keys Keys, want bloomSize) (*shard, error) {
	f := &shard{rdb: rdb, opt: opt, keys: keys, allKeys: keys.all()}
	crand.Read(f.contentKey[:]) // never fails
	if opt.Strategy == "" || opt.Strategy == StrategyBFS || opt.Strategy == StrategyDFS {
		f.links = newLinkCache(opt.LinkCache)
	}
	res, err := f.callSlice(ctx, "init", 0, opt.Strategy, opt.DedupMode, want.M, want.K, want.Seg, contentBits)
	if err != nil || len(res) != 8 {
		return nil, wrap("new frontier", cmpErr(err, fmt.Errorf("init returned %d values", len(res))))
	}
	str := func(v any) string { s, _ := v.(string); return s }
	got, err := strconv.Atoi(str(res[0]))
	if err != nil || (got != 0 && (got < 8 || got > 24)) {
		return nil, fmt.Errorf("new frontier: crawl %q has invalid seen_bits %q", opt.Crawl, str(res[0]))
	}
	if str(res[1]) != opt.Strategy {
		return nil, fmt.Errorf("new frontier: crawl %q was created with strategy %s, not %s", opt.Crawl, str(res[1]), opt.Strategy)
	}
	if str(res[2]) != opt.DedupMode {
		return nil, fmt.Errorf("new frontier: crawl %q was created with dedup mode %s, not %s", opt.Crawl, str(res[2]), opt.DedupMode)
	}
	f.seenBits, f.contentBits = uint(got), uint(got)
	load := 0 // a fixed layout
	if got == 0 {
		load = cmp.Or(opt.seenLoad, seenLoad)
		cb, err := strconv.Atoi(str(res[6]))
		if err != nil || cb < 1 || cb > 24 {
			return nil, fmt.Errorf("new frontier: crawl %q has invalid content_bits %q", opt.Crawl, str(res[6]))
		}
		f.contentBits = uint(cb)
	}
	if opt.DedupMode == DedupBloom {
		if f.bloom, err = parseBloomSize(str(res[3]), str(res[4]), str(res[5])); err != nil {
			return nil, fmt.Errorf("new frontier: crawl %q: %w", opt.Crawl, err)
		}
		if created, _ := toInt(res[7]); created == 1 {
			if err := f.allocBloom(ctx); err != nil {
				return nil, wrap("new frontier: allocate bloom filter", err)
			}
		}
	}
	if f.differ, err = f.putSettings(ctx, f.settings(load)); err != nil {
		return nil, fmt.Errorf("new frontier: %w", err)
	}
	return f, nil
}

func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// pq reports whether the strategy keeps importance-ordered queues.
func (f *shard) pq() bool {
	return f.opt.Strategy == StrategyPriority || f.opt.Strategy == StrategyAOPIC
}

// Keys returns the crawl's keys.
func (f *shard) Keys() Keys { return f.keys }

// Client returns the Redis client.
func (f *shard) Client() redis.UniversalClient { return f.rdb }

// Fingerprint is the 64-bit fingerprint of a canonical URL: the first 8
// bytes of its SHA-256. It is stored in Redis, so it never changes.
func Fingerprint(canonical string) uint64 { return urlx.Fingerprint(canonical) }

// seenSlot returns a URL's tuple bucket and field (slot).
func (f *shard) seenSlot(url string) (string, string) {
	return f.slot(Fingerprint(url))
}

// slot returns a URL fingerprint's tuple bucket and field. With growing
// buckets (seenBits 0) the bucket is the low 32 bits, from which the
// scripts pick the bucket (LH.bucket_key), and the field the top 56 bits,
// the bucket's member, both in decimal. With a fixed layout it is
// fixedSlot with seenBits. Bucket and field together keep all 64 bits.
func (f *shard) slot(fp uint64) (string, string) {
	if f.seenBits == 0 {
		return strconv.FormatUint(fp&math.MaxUint32, 10), strconv.FormatUint(fp>>8, 10)
	}
	return fixedSlot(fp, f.seenBits)
}

// contentSlot returns a content hash's bucket and field (fixedSlot with
// the crawl's contentBits).
func (f *shard) contentSlot(fp uint64) (string, string) { return fixedSlot(fp, f.contentBits) }

// fixedSlot splits a 64-bit fingerprint into a bucket of a fixed layout of
// b bits and a field: the top b bits pick the bucket (hex) and the
// remaining bits, packed big-endian, are the field.
func fixedSlot(fp uint64, b uint) (string, string) {
	bucket := fp >> (64 - b)
	rest := fp << b >> b // low 64-b bits
	n := int(64-b+7) / 8
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], rest)
	return strconv.FormatUint(bucket, 16), string(buf[8-n:])
}

// encodeTask returns a task string (keys.go): depth \t hops \t attempt \t
// url. The depth field carries the task's marks:
//
//	[r][s<level>[x]:]<depth>[@<lastmod>]
//
// "r" first for a render task (the scripts' is_render reads only that
// byte), "s<level>:" for a sitemap task ("x" when SitemapAnyHost), and
// "@<unix seconds>" for a sitemap's lastmod. The scripts copy the field
// as it is; only parseTask reads it.
func encodeTask(t Task) string {
	var b strings.Builder
	b.Grow(len(t.URL) + 24)
	if t.Render {
		b.WriteByte('r')
	}
	if t.Sitemap > 0 {
		b.WriteByte('s')
		b.WriteString(strconv.Itoa(t.Sitemap))
		if t.SitemapAnyHost {
			b.WriteByte('x')
		}
		b.WriteByte(':')
	}
	b.WriteString(strconv.Itoa(t.Depth))
	if t.LastMod != 0 {
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(t.LastMod, 10))
	}
	b.WriteByte('\t')
	b.WriteString(strconv.Itoa(t.Hops))
	b.WriteByte('\t')
	b.WriteString(strconv.Itoa(t.Attempt))
	b.WriteByte('\t')
	b.WriteString(t.URL)
	return b.String()
}

// parseDepthField reads encodeTask's depth field into t.
func parseDepthField(f string, t *Task) error {
	f, t.Render = strings.CutPrefix(f, "r")
	if rest, ok := strings.CutPrefix(f, "s"); ok {
		mark, after, found := strings.Cut(rest, ":")
		if !found {
			return errors.New("sitemap mark without ':'")
		}
		mark, t.SitemapAnyHost = strings.CutSuffix(mark, "x")
		level, err := strconv.Atoi(mark)
		if err != nil || level <= 0 {
			return fmt.Errorf("sitemap level %q", mark)
		}
		t.Sitemap, f = level, after
	}
	if depth, lm, ok := strings.Cut(f, "@"); ok {
		v, err := strconv.ParseInt(lm, 10, 64)
		if err != nil {
			return fmt.Errorf("lastmod: %w", err)
		}
		t.LastMod, f = v, depth
	}
	d, err := strconv.Atoi(f)
	t.Depth = d
	return err
}

// task tuples (links and seeds) are passed to functions as tupleLen ARGV
// each: bucket, field, host, scope_host, prio, task, qvar. In bloom mode
// bucket and field are the decimal a = h1 mod m and b = 1 + h2 mod (m-1)
// of the URL's Bloom positions (bloom.go).
const tupleLen = 7

func (f *shard) appendTuples(args []any, ts []Task) []any {
	return f.appendTuplesFP(args, ts, nil)
}

// appendTuplesFP is appendTuples with the tasks' fingerprints already
// computed (fps[i] for ts[i]; nil: computed here).
func (f *shard) appendTuplesFP(args []any, ts []Task, fps []uint64) []any {
	for i, t := range ts {
		var b, fld string
		switch {
		case f.bloom.M > 0:
			b, fld = f.bloom.args(t.URL)
		case fps != nil:
			b, fld = f.slot(fps[i])
		default:
			b, fld = f.seenSlot(t.URL)
		}
		qv := ""
		date := t.DateQuery && f.opt.MaxDateVariants > 0
		if t.PathKey != "" && (date || f.opt.MaxQueryVariants > 0) {
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], Fingerprint(t.PathKey))
			qv = string(buf[:])
			if date {
				// its own cap, the crawl's MaxDateVariants: 8 bytes and "d"
				// (admit in queue.lua)
				qv += "d"
			}
		}
		args = append(args, b, fld, t.Host, t.ScopeHost, f.prio(t), encodeTask(t), qv)
	}
	return args
}

// prio is a new task's prio ARGV: the list priority with bfs (Priority)
// and dfs (-Depth), the pq score -importance with priority (X·1 + Y·Score:
// found once) and aopic (cash 1, a seed's; a link's cash is set by the
// complete script).
func (f *shard) prio(t Task) string {
	switch f.opt.Strategy {
	case StrategyDFS:
		return strconv.Itoa(-t.Depth)
	case StrategyPriority:
		return fmtFloat(-(f.opt.PriorityX + f.opt.PriorityY*t.Score))
	case StrategyAOPIC:
		return "-1"
	}
	return strconv.FormatInt(t.Priority, 10)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func seed() int64 { return rand.Int64N(math.MaxInt32) }

// callSlice is call for a function that returns an array.
func (f *shard) callSlice(ctx context.Context, name string, args ...any) ([]any, error) {
	res, err := f.call(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("%s returned %T, not an array", name, res)
	}
	return arr, nil
}

// callInt is call for a function that returns an integer.
func (f *shard) callInt(ctx context.Context, name string, args ...any) (int64, error) {
	res, err := f.call(ctx, name, args...)
	if err != nil {
		return 0, err
	}
	return toInt(res)
}

// wrap adds the operation and marks connection failures ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isUnavailable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s := err.Error()
	for _, p := range []string{"connection refused", "i/o timeout", "EOF", "LOADING", "broken pipe", "connection reset", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "NOREPLICAS", "connection pool timeout"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func parseTask(host string, prio int64, task string) (Task, error) {
	t := Task{Host: host, Priority: prio}
	parts := strings.SplitN(task, "\t", 4)
	if len(parts) != 4 {
		return t, fmt.Errorf("malformed task %q", task)
	}
	var err2, err3 error
	err1 := parseDepthField(parts[0], &t)
	t.Hops, err2 = strconv.Atoi(parts[1])
	t.Attempt, err3 = strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return t, fmt.Errorf("malformed task %q: %w", task, err)
	}
	t.URL = parts[3]
	return t, nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T %v", v, v)
}
