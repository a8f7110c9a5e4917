package frontier

import (
	"errors"
	"fmt"
	"time"

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
