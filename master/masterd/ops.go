package masterd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
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
	var tasks []frontier.Task
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
		tasks = append(tasks, frontier.NewTask(u, 0, 0))
	}
	f, closeFn, err := open(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer closeFn()
	n, err := f.Seed(ctx, tasks)
	res.Added = n
	res.Seen = len(tasks) - n
	return res, err
}

// Status returns a crawl's snapshot.
func Status(ctx context.Context, cfg *config.Config) (frontier.Stats, error) {
	f, closeFn, err := open(ctx, cfg)
	if err != nil {
		return frontier.Stats{}, err
	}
	defer closeFn()
	return f.Stats(ctx)
}

func open(ctx context.Context, cfg *config.Config) (*frontier.Redis, func(), error) {
	ropt, err := cfg.RedisOptions()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(ropt)
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		rdb.Close()
		if errors.Is(err, frontier.ErrUnavailable) {
			return nil, nil, fmt.Errorf("redis at %s is unreachable: %w", cfg.Redis.URL, err)
		}
		return nil, nil, err
	}
	return f, func() { rdb.Close() }, nil
}
