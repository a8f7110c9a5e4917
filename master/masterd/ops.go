package masterd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"net/url"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// SeedResult says what became of seeds.
type SeedResult struct {
	Added    int      `json:"added"`
	Seen     int      `json:"already_seen"`
	Rejected []string `json:"rejected,omitempty"` // "url: reason"
}

// Seed canonicalizes and scopes URLs and enqueues those never seen.
func Seed(ctx context.Context, cfg *config.Config, rawURLs []string) (SeedResult, error) {
	var res SeedResult
	canon, err := urlx.NewCanonicalizer(cfg.Crawl.StripParams)
	if err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	scope, err := urlx.NewScope(cfg.Crawl.AllowHosts, cfg.Crawl.Allow, cfg.Crawl.Deny, cfg.Crawl.MaxDepth)
	if err != nil {
		return res, fmt.Errorf("seed: %w", err)
	}
	set, err := LoadRules(cfg)
	if err != nil {
		return res, fmt.Errorf("seed: the rule files are invalid (fix them, or empty rules.dir): %w", err)
	}
	var tasks []frontier.Task
	policies := map[string]frontier.HostPolicy{}
	for _, raw := range rawURLs {
		raw = strings.TrimSpace(raw)
		if raw == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		u, err := canon.Canonicalize(raw)
		if err != nil {
			res.Rejected = append(res.Rejected, fmt.Sprintf("%s: %v", raw, err))
			continue
		}
		if ok, why := scope.Check(u, 0); !ok {
			res.Rejected = append(res.Rejected, fmt.Sprintf("%s: out of scope (%s)", raw, why))
			continue
		}
		t := frontier.NewTask(u, 0, 0)
		if rs := set.Match(u); rs != nil {
			if ok, why := rs.InScope(u, 0); !ok {
				res.Rejected = append(res.Rejected, fmt.Sprintf("%s: out of the scope of rule set %s (%s)", raw, rs.Name, why))
				continue
			}
			t.Render = rs.RenderFor(u) != nil
			if p, ok := slaved.HostPolicy(rs); ok {
				policies[t.Host] = p
			}
		}
		tasks = append(tasks, t)
	}
	f, closeFn, err := open(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer closeFn()
	n, err := f.SeedWithPolicies(ctx, tasks, policies)
	res.Added = n
	res.Seen = len(tasks) - n
	return res, err
}

// StatusReport is a crawl's snapshot with the rule set in force.
type StatusReport struct {
	frontier.Stats
	RulesVersion string `json:"rules_version"`
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
	return StatusReport{Stats: st, RulesVersion: v}, err
}

// redactURL hides the password of a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "redis.url"
	}
	return u.Redacted()
}

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
