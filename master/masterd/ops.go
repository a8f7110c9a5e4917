package masterd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/secret"
	"github.com/redcrawl/redcrawl/shared/store"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// SeedResult says what became of seeds.
type SeedResult struct {
	Added    int      `json:"added"`
	Seen     int      `json:"already_seen"`
	Rejected []string `json:"rejected,omitempty"` // "url: reason"
}

// Seed canonicalizes and scopes URLs and enqueues those never seen. The
// accepted URLs are recorded as the crawl's seeds, which a scheduled
// recrawl enqueues again.
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
	return seedWith(ctx, cfg, f, set, rawURLs)
}

// seedWith is Seed on an open frontier with a loaded rule set.
func seedWith(ctx context.Context, cfg *config.Config, f *frontier.Redis, set *rules.Set, rawURLs []string) (SeedResult, error) {
	p, err := planSeeds(cfg, set, rawURLs, nil)
	if err != nil {
		return SeedResult{}, err
	}
	res := SeedResult{Rejected: p.rejected}
	n, err := f.SeedWithPolicies(ctx, p.tasks, p.policies)
	res.Added = n
	res.Seen = len(p.tasks) - n
	if err != nil {
		return res, err
	}
	return res, f.RecordSeeds(ctx, p.urls)
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
	canon, err := urlx.NewCanonicalizer(cfg.Crawl.StripParams)
	if err != nil {
		return p, fmt.Errorf("seed: %w", err)
	}
	scope, err := urlx.NewScope(cfg.Crawl.AllowHosts, cfg.Crawl.Allow, cfg.Crawl.Deny, cfg.Crawl.MaxDepth)
	if err != nil {
		return p, fmt.Errorf("seed: %w", err)
	}
	for _, raw := range rawURLs {
		raw = strings.TrimSpace(raw)
		if raw == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		u, err := canon.Canonicalize(raw)
		if err != nil {
			p.rejected = append(p.rejected, fmt.Sprintf("%s: %v", raw, err))
			continue
		}
		if ok, why := scope.Check(u, 0); !ok {
			p.rejected = append(p.rejected, fmt.Sprintf("%s: out of scope (%s)", raw, why))
			continue
		}
		t := frontier.NewTask(u, 0, 0)
		rs := set.Match(u)
		if keep != nil && !keep(rs) {
			continue
		}
		if rs != nil {
			if ok, why := rs.InScope(u, 0); !ok {
				p.rejected = append(p.rejected, fmt.Sprintf("%s: out of the scope of rule set %s (%s)", raw, rs.Name, why))
				continue
			}
			t.Render = rs.RenderFor(u) != nil
			if hp, ok := slaved.HostPolicy(rs); ok {
				p.policies[t.Host] = hp
			}
		}
		p.tasks = append(p.tasks, t)
		p.urls = append(p.urls, t.URL)
	}
	return p, nil
}

// reseed enqueues the crawl's recorded seeds again (a recrawl): all of
// them for name "", else those the rule set of that name matches.
func reseed(ctx context.Context, cfg *config.Config, f *frontier.Redis, set *rules.Set, name string) (int, error) {
	urls, err := f.SeedURLs(ctx)
	if err != nil {
		return 0, err
	}
	var keep func(*rules.RuleSet) bool
	if name != "" {
		keep = func(rs *rules.RuleSet) bool { return rs != nil && rs.Name == name }
	}
	p, err := planSeeds(cfg, set, urls, keep)
	if err != nil {
		return 0, err
	}
	return f.Reseed(ctx, p.tasks, p.policies)
}

// StatusReport is a crawl's snapshot with the rule set in force.
type StatusReport struct {
	frontier.Stats
	RulesVersion string `json:"rules_version"`
	// Recrawl is the last recrawl run's counts (nil: none yet); when
	// MySQL could not be read, RecrawlError says why.
	Recrawl      *RecrawlStatus `json:"recrawl,omitempty"`
	RecrawlError string         `json:"recrawl_error,omitempty"`
}

// Status returns a crawl's snapshot.
func Status(ctx context.Context, cfg *config.Config) (StatusReport, error) {
	f, closeFn, err := open(ctx, cfg)
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
	if err == nil && st.RecrawlRun > 0 {
		// the counts are in MySQL: best effort, the queues are shown anyway
		db, serr := openStore(ctx, cfg)
		if serr == nil {
			rep.Recrawl, serr = recrawlStatus(ctx, db, st)
			db.Close()
		}
		if serr != nil {
			rep.RecrawlError = serr.Error()
		}
	}
	return rep, err
}

// redactURL hides the password of a URL for messages.
func redactURL(raw string) string { return secret.URL(raw) }

func open(ctx context.Context, cfg *config.Config) (*frontier.Redis, func(), error) {
	rdb, err := cfg.NewRedisClient()
	if err != nil {
		return nil, nil, err
	}
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		rdb.Close()
		if errors.Is(err, frontier.ErrUnavailable) {
			return nil, nil, fmt.Errorf("redis at %s is unreachable: %w", redactURL(cfg.Redis.URL), err)
		}
		return nil, nil, err
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
