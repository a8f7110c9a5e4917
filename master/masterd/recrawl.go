package masterd

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// Incremental recrawls, on the master. A recrawl run (a schedule firing,
// or bin/master seed --recrawl) is numbered in the frontier
// (StartRecrawl), then re-enqueues every page the crawl recorded in MySQL
// (page_validators, recrawlBatch at a time, in url_hash order) with the
// validators its last fetch returned, and finally the recorded seeds
// (MySQL's seeds table, likewise; a seed never stored as a page, a failed
// one, is queued without). A page
// leased or queued is left as it is (Reseed). The slaves send conditional
// requests and record each page as unchanged, changed or new (pages.revisit),
// which RecrawlStatus counts since the run started.

// recrawlBatch is how many recorded pages or seeds one MySQL read and one
// Reseed take.
const recrawlBatch = 1000

// recrawl runs a recrawl: every recorded page and every recorded seed
// (both in MySQL), for name "" all of them, else those the rule set of
// that name matches. It returns how many tasks it enqueued.
func recrawl(ctx context.Context, cfg *config.Config, f *frontier.Redis, st *store.Store, set *rules.Set, name string) (int, error) {
	if _, _, err := f.StartRecrawl(ctx); err != nil {
		return 0, err
	}
	total, err := reseedAll(ctx, f, func(after []byte) ([]store.RecordedPage, []byte, error) {
		return st.RecordedPages(ctx, cfg.Crawl.Name, after, recrawlBatch)
	}, func(ps []store.RecordedPage) (seedPlan, error) {
		return planRecorded(cfg, set, ps, name)
	})
	if err != nil {
		return total, err
	}
	n, err := reseed(ctx, cfg, f, st, set, name)
	return total + n, err
}

// reseedAll pages through what the crawl recorded in MySQL (read: a
// batch after a key, and the batch's last key, nil when none is left) and
// enqueues each batch again as plan makes it into tasks (Reseed). It
// returns how many tasks it enqueued.
func reseedAll[T any](ctx context.Context, f *frontier.Redis, read func(after []byte) ([]T, []byte, error),
	plan func([]T) (seedPlan, error)) (int, error) {
	total := 0
	var after []byte
	for {
		batch, next, err := read(after)
		if err != nil {
			return total, fmt.Errorf("recrawl: %w", err)
		}
		if next == nil {
			return total, nil
		}
		p, err := plan(batch)
		if err != nil {
			return total, err
		}
		n, err := f.Reseed(ctx, p.tasks, p.policies)
		total += n
		if err != nil {
			return total, err
		}
		after = next
	}
}

// planRecorded makes recorded pages into recrawl tasks at their recorded
// depth, with their validators, routed and policed by the rule set (nil:
// none). A page now out of scope (config or rule set) is left out, as is
// one a named recrawl's rule set does not match.
func planRecorded(cfg *config.Config, set *rules.Set, ps []store.RecordedPage, name string) (seedPlan, error) {
	p := seedPlan{policies: map[string]frontier.HostPolicy{}}
	planner, err := plan.New(cfg)
	if err != nil {
		return p, fmt.Errorf("recrawl: %w", err)
	}
	for _, rp := range ps {
		u, err := url.Parse(rp.URL)
		if err != nil || !u.IsAbs() {
			continue
		}
		rs := set.Match(u)
		if name != "" && (rs == nil || rs.Name != name) {
			continue
		}
		// a page now out of scope (the crawl's or its rule set's) is left out
		p.add(planner, u, rp.Depth, rs, &frontier.Validators{ETag: rp.ETag, LastModified: rp.LastModified, Checksum: rp.Checksum})
	}
	return p, nil
}

// Recrawl starts a recrawl run now (bin/master seed --recrawl): every page
// the crawl recorded is enqueued again with its validators, then the
// recorded seeds. It returns how many tasks were enqueued.
func Recrawl(ctx context.Context, cfg *config.Config) (int, error) {
	set, err := LoadRules(cfg)
	if err != nil {
		return 0, fmt.Errorf("recrawl: the rule files are invalid (fix them, or empty rules.dir): %w", err)
	}
	st, err := openStoreOnce(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("recrawl: %w", err)
	}
	defer st.Close()
	f, closeFn, err := openExisting(ctx, cfg, st)
	if err != nil {
		return 0, err
	}
	defer closeFn()
	return recrawl(ctx, cfg, f, st, set, "")
}

// RecrawlStatus is the last recrawl run: its number, start and the pages
// fetched since, by how they were found (pages.revisit).
type RecrawlStatus struct {
	Run     int64     `json:"run"`
	Started time.Time `json:"started"`
	store.RecrawlCounts
}

// recrawlStatus reads the last recrawl run's counts; nil when the crawl
// has had none.
func recrawlStatus(ctx context.Context, st *store.Store, s frontier.Stats) (*RecrawlStatus, error) {
	if s.RecrawlRun == 0 || st == nil {
		return nil, nil
	}
	at := time.UnixMilli(s.RecrawlAt).UTC()
	c, err := st.RecrawlCounts(ctx, s.Crawl, at)
	if err != nil {
		return nil, err
	}
	return &RecrawlStatus{Run: s.RecrawlRun, Started: at, RecrawlCounts: c}, nil
}
