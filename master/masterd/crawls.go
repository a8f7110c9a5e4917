package masterd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/suggest"
)

// UnknownCrawlError is a command's crawl (--crawl or crawl.name) that
// neither Redis nor MySQL knows: the command refuses it rather than
// create it (master seed and master run create crawls).
type UnknownCrawlError struct {
	Crawl string
	// Known are the crawls that exist, sorted.
	Known []string
}

func (e *UnknownCrawlError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("crawl %q does not exist, and there is no crawl yet: master seed URL... starts one (--crawl or crawl.name names it)", e.Crawl)
	}
	hint := ""
	best, bestD := "", 4
	for _, k := range e.Known {
		if d := suggest.Distance(e.Crawl, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf("crawl %q does not exist%s; the crawls are: %s (give one with --crawl, or set crawl.name)",
		e.Crawl, hint, strings.Join(e.Known, ", "))
}

// Crawls lists the crawls that exist, sorted: those in Redis and, when st
// is not nil, those MySQL holds rows of.
func Crawls(ctx context.Context, rdb redis.UniversalClient, st *store.Store) ([]string, error) {
	var out []string
	if rdb != nil {
		r, err := frontier.Crawls(ctx, rdb)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	if st != nil {
		m, err := st.Crawls(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// openExisting is open for a command that reads or acts on a crawl: a
// crawl Redis does not hold (nor MySQL, with st) is an
// *UnknownCrawlError, and nothing is created.
func openExisting(ctx context.Context, cfg *config.Config, st *store.Store) (*frontier.Redis, func(), error) {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	ok, err := frontier.CrawlExists(ctx, rdb, cfg.Crawl.Name)
	if err == nil && !ok && st != nil {
		ok, err = st.HasCrawl(ctx, cfg.Crawl.Name)
	}
	if err == nil && !ok {
		known, lerr := Crawls(ctx, rdb, st)
		if lerr != nil {
			err = lerr
		} else {
			err = &UnknownCrawlError{Crawl: cfg.Crawl.Name, Known: known}
		}
	}
	if err != nil {
		rdb.Close()
		return nil, nil, onceErr(frontier.RedisServer(cfg), err)
	}
	rdb.Close()
	return open(ctx, cfg)
}

// checkStoreCrawl refuses, for a command that reads only MySQL (export), a
// crawl MySQL holds no rows of.
func checkStoreCrawl(ctx context.Context, st *store.Store, crawl string) error {
	ok, err := st.HasCrawl(ctx, crawl)
	if err != nil || ok {
		return err
	}
	known, err := st.Crawls(ctx)
	if err != nil {
		return err
	}
	return &UnknownCrawlError{Crawl: crawl, Known: known}
}
