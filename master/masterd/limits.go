package masterd

import (
	"context"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// LimitsOf are the limits of a config (crawl.max_pages, max_items,
// max_duration) as the frontier keeps them.
func LimitsOf(cfg *config.Config) frontier.Limits {
	return frontier.Limits{MaxPages: cfg.Crawl.MaxPages, MaxItems: cfg.Crawl.MaxItems, Timed: cfg.Crawl.MaxDuration > 0}
}

// ApplyLimits makes the config's limits the crawl's (frontier.SetLimits):
// a master writes them when it opens the crawl, master crawl before its
// slaves start. The counts of a crawl that had none start from its pages
// (done and failed in Redis) and its items (in MySQL: db, or a store
// opened here when nil). It returns the limit already reached ("" for
// none) and whether a crawl a limit had ended was reopened.
func ApplyLimits(ctx context.Context, cfg *config.Config, front *frontier.Redis, db *store.Store) (reached string, reopened bool, err error) {
	lim := LimitsOf(cfg)
	var pages, items int64
	if lim != (frontier.Limits{}) {
		st, err := front.Stats(ctx)
		if err != nil {
			return "", false, err
		}
		pages = st.Done + st.Failed
		if db == nil {
			if db, err = openStoreOnce(ctx, cfg); err != nil {
				return "", false, err
			}
			defer db.Close()
		}
		if items, err = db.CountItems(ctx, cfg.Crawl.Name); err != nil {
			return "", false, err
		}
	}
	return front.SetLimits(ctx, lim, pages, items)
}
