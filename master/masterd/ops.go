package masterd

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// SeedResult says what became of seeds.
type SeedResult struct {
	Added    int      `json:"added"`
	Seen     int      `json:"already_seen"`
	Rejected []string `json:"rejected,omitempty"` // "url: reason"
}

// Seed canonicalizes and scopes URLs and enqueues those never seen. The
// accepted URLs are recorded as the crawl's seeds in MySQL, which every
// recrawl enqueues again; see seedWith for the order and what a failure
// leaves.
func Seed(ctx context.Context, cfg *config.Config, rawURLs []string) (SeedResult, error) {
	set, err := LoadRules(cfg)
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed: the rule files are invalid (fix them, or empty rules.dir): %w", err)
	}
	f, closeFn, err := open(ctx, cfg)
	if err != nil {
		return SeedResult{}, err
	}
	defer closeFn()
	st, err := openStoreOnce(ctx, cfg)
	if err != nil {
		return SeedResult{}, fmt.Errorf("seed: nothing enqueued: the seeds are recorded in MySQL first: %w", err)
	}
	defer st.Close()
	return seedWith(ctx, cfg, f, st, set, rawURLs)
}

// seedWith is Seed on an open frontier and store with a loaded rule set.
//
// The seeds are recorded in MySQL (store.RecordSeeds) before any is
// enqueued in Redis, so a seed in the frontier is always one a recrawl
// will find again. When MySQL fails, nothing is enqueued and the error
// says so (some seeds may be recorded already: harmless, as recording is
// idempotent and a recrawl of a seed never enqueued just fetches it);
// when Redis fails after that, the seeds are recorded and some may be
// enqueued. Either way the same seed command run again completes the
// work: recording changes nothing the second time, and a seed enqueued
// the first time counts as already seen (Redis dedup).
func seedWith(ctx context.Context, cfg *config.Config, f *frontier.Redis, st *store.Store, set *rules.Set, rawURLs []string) (SeedResult, error) {
	p, err := planSeeds(cfg, set, rawURLs, nil)
	if err != nil {
		return SeedResult{}, err
	}
	res := SeedResult{Rejected: p.rejected}
	if err := st.RecordSeeds(ctx, cfg.Crawl.Name, p.urls); err != nil {
		return res, fmt.Errorf("seed: nothing enqueued (run the same seed command again): %w", err)
	}
	n, err := f.SeedWithPolicies(ctx, p.tasks, p.policies)
	res.Added = n
	res.Seen = len(p.tasks) - n
	if err != nil {
		return res, fmt.Errorf("seed: recorded, not all enqueued (run the same seed command again): %w", err)
	}
	return res, nil
}

// seedPlan is what planSeeds makes of raw URLs.
type seedPlan struct {
	tasks    []frontier.Task
	policies map[string]frontier.HostPolicy
	urls     []string // canonical URLs of tasks
	rejected []string // "url: reason"
}

// planSeeds canonicalizes and scopes raw URLs into seed tasks, routed and
// policed by the rule set (nil: none). keep, when not nil, drops URLs for
// which it returns false, given the rule set matching the URL (nil when
// none).
func planSeeds(cfg *config.Config, set *rules.Set, rawURLs []string, keep func(*rules.RuleSet) bool) (seedPlan, error) {
	p := seedPlan{policies: map[string]frontier.HostPolicy{}}
	planner, err := plan.New(cfg)
	if err != nil {
		return p, fmt.Errorf("seed: %w", err)
	}
	for _, raw := range rawURLs {
		raw = strings.TrimSpace(raw)
		if raw == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		u, err := planner.Canonicalizer().Canonicalize(raw)
		if err != nil {
			p.rejected = append(p.rejected, fmt.Sprintf("%s: %v", raw, err))
			continue
		}
		rs := set.Match(u)
		if keep != nil && !keep(rs) {
			continue
		}
		if why := p.add(planner, u, 0, rs, nil); why != "" {
			p.rejected = append(p.rejected, fmt.Sprintf("%s: %s", raw, why))
			continue
		}
		p.urls = append(p.urls, p.tasks[len(p.tasks)-1].URL)
	}
	return p, nil
}

// add plans the task of URL u at depth by its rule set rs (nil: none):
// scoped, routed render or not, its host's policy kept, revisit its
// validators (a recrawl's); it returns why it is refused instead ("" when
// added).
func (p *seedPlan) add(planner *plan.Planner, u *url.URL, depth int, rs *rules.RuleSet, revisit *frontier.Validators) string {
	t, policy, why, ok := planner.Task(u, depth, 0, rs)
	if !ok {
		return why
	}
	t.Revisit = revisit
	if policy != nil {
		p.policies[t.Host] = *policy
	}
	p.tasks = append(p.tasks, t)
	return ""
}

// reseed enqueues the crawl's recorded seeds again (a recrawl): all of
// them for name "", else those the rule set of that name matches. It reads
// them from MySQL recrawlBatch at a time, in url_hash order.
func reseed(ctx context.Context, cfg *config.Config, f *frontier.Redis, st *store.Store, set *rules.Set, name string) (int, error) {
	var keep func(*rules.RuleSet) bool
	if name != "" {
		keep = func(rs *rules.RuleSet) bool { return rs != nil && rs.Name == name }
	}
	return reseedAll(ctx, f, func(after []byte) ([]string, []byte, error) {
		return st.SeedURLs(ctx, cfg.Crawl.Name, after, recrawlBatch)
	}, func(urls []string) (seedPlan, error) {
		return planSeeds(cfg, set, urls, keep)
	})
}

// StatusReport is a crawl's snapshot with the rule set in force.
type StatusReport struct {
	frontier.Stats
	RulesVersion string `json:"rules_version"`
	// Recrawl is the last recrawl run's counts (nil: none yet); when
	// MySQL could not be read, RecrawlError says why.
	Recrawl      *RecrawlStatus `json:"recrawl,omitempty"`
	RecrawlError string         `json:"recrawl_error,omitempty"`
	// Summary is the crawl's stats from its MySQL rows too (nil when
	// MySQL could not be read: SummaryError says why).
	Summary      *CrawlStats `json:"summary,omitempty"`
	SummaryError string      `json:"summary_error,omitempty"`
	// PrivateRefused counts the fetches refused as non-public addresses
	// (exceptions of kind blocked, fetch.allow_private_networks): nil
	// when MySQL could not be read.
	PrivateRefused *int `json:"private_refused,omitempty"`
}

// Status returns a crawl's snapshot; a crawl Redis does not hold is an
// *UnknownCrawlError (and is not created).
func Status(ctx context.Context, cfg *config.Config) (StatusReport, error) {
	f, closeFn, err := openExisting(ctx, cfg, nil)
	if err != nil {
		return StatusReport{}, err
	}
	defer closeFn()
	st, err := f.Stats(ctx)
	if err != nil {
		return StatusReport{}, err
	}
	v, _, _, err := f.GetRules(ctx)
	rep := StatusReport{Stats: st, RulesVersion: v}
	if err != nil {
		return rep, err
	}
	// the counts are in MySQL: best effort, the queues are shown anyway
	db, serr := OpenStore(ctx, cfg)
	if serr != nil {
		rep.SummaryError = serr.Error()
		if st.RecrawlRun > 0 {
			rep.RecrawlError = serr.Error()
		}
		return rep, nil
	}
	defer db.Close()
	if st.RecrawlRun > 0 {
		if rep.Recrawl, serr = recrawlStatus(ctx, db, st); serr != nil {
			rep.RecrawlError = serr.Error()
		}
	}
	if sum, serr := crawlStats(ctx, st, db, time.Now()); serr != nil {
		rep.SummaryError = serr.Error()
	} else {
		rep.Summary = &sum
		// the summary's exception kinds hold the count: no query of its own
		n := int(sum.Exceptions[events.KindBlocked])
		rep.PrivateRefused = &n
	}
	return rep, nil
}

func open(ctx context.Context, cfg *config.Config) (*frontier.Redis, func(), error) {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		rdb.Close()
		return nil, nil, onceErr(frontier.RedisServer(cfg), err)
	}
	return f, func() { rdb.Close() }, nil
}

// Migrate creates the crawl database if it is missing and applies the
// pending migrations, as mysql.migrate_dsn's user when it is set, else as
// mysql.dsn's (bin/master migrate).
func Migrate(ctx context.Context, cfg *config.Config) error {
	mm, err := cfg.MigrateMySQLConfig()
	if err != nil {
		return err
	}
	return store.MigrateConfig(ctx, mm)
}
