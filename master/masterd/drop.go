package masterd

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// Running is who runs a crawl now: its slaves whose heartbeat is younger
// than master.dead_after, and the master that holds its shard 0 (its
// owner key, a lease the master renews).
type Running struct {
	Slaves []string
	Master string
}

// Any reports whether anything runs the crawl.
func (r Running) Any() bool { return len(r.Slaves) > 0 || r.Master != "" }

// String says who runs it, for a refusal.
func (r Running) String() string {
	switch {
	case len(r.Slaves) > 0 && r.Master != "":
		return fmt.Sprintf("%d slaves (%s) and master %s run it", len(r.Slaves), list(r.Slaves, 5), r.Master)
	case len(r.Slaves) > 0:
		return fmt.Sprintf("%d slaves run it (%s)", len(r.Slaves), list(r.Slaves, 5))
	case r.Master != "":
		return "master " + r.Master + " runs it"
	}
	return "nothing runs it"
}

// list joins the first n names, saying how many more there are.
func list(names []string, n int) string {
	if len(names) <= n {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:n], len(names)-n)
}

// CrawlRunning reads who runs cfg's crawl, without opening it (nothing is
// written but the library, which a master's user loads when missing).
func CrawlRunning(ctx context.Context, cfg *config.Config) (Running, error) {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return Running{}, err
	}
	defer rdb.Close()
	return crawlRunning(ctx, cfg, rdb)
}

func crawlRunning(ctx context.Context, cfg *config.Config, rdb redis.UniversalClient) (Running, error) {
	var r Running
	name := cfg.Crawl.Name
	exists, err := frontier.CrawlExists(ctx, rdb, name)
	if err != nil || !exists {
		return r, onceErr(frontier.RedisServer(cfg), err)
	}
	if err := frontier.LoadLibrary(ctx, rdb); err != nil {
		return r, err
	}
	snap, err := frontier.PeekSnapshot(ctx, rdb, name)
	if err != nil {
		return r, fmt.Errorf("crawl %s: %w", name, err)
	}
	for _, s := range snap.Slaves {
		if snap.Now.Sub(s.LastSeen) <= cfg.Master.DeadAfter {
			r.Slaves = append(r.Slaves, s.Slave)
		}
	}
	r.Master, err = rdb.Get(ctx, frontier.NewKeys(name).Owner).Result()
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return r, wrapRead("crawl owner", err)
}

// wrapRead names a failed read.
func wrapRead(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// DropResult is what DropCrawl removed.
type DropResult struct {
	Keys int64 // Redis keys, every shard's
	Rows int64 // MySQL rows
}

// DropCrawl removes cfg's crawl: every Redis key of it, on every shard
// (frontier.DropCrawl), and unless keepRows every MySQL row of it
// (store.DeleteCrawl). It refuses while the crawl's slaves or its master
// run, unless force: they would write it again.
func DropCrawl(ctx context.Context, cfg *config.Config, keepRows, force bool) (DropResult, error) {
	var res DropResult
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return res, err
	}
	defer rdb.Close()
	if !force {
		run, err := crawlRunning(ctx, cfg, rdb)
		if err != nil {
			return res, err
		}
		if run.Any() {
			return res, &RunningError{Crawl: cfg.Crawl.Name, Running: run}
		}
	}
	if res.Keys, err = frontier.DropCrawl(ctx, rdb, cfg.Crawl.Name); err != nil {
		return res, onceErr(frontier.RedisServer(cfg), err)
	}
	if keepRows {
		return res, nil
	}
	db, err := openStoreOnce(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer db.Close()
	res.Rows, err = db.DeleteCrawl(ctx, cfg.Crawl.Name)
	return res, err
}

// RunningError is a crawl that cannot be dropped while it runs.
type RunningError struct {
	Crawl   string
	Running Running
}

func (e *RunningError) Error() string {
	return fmt.Sprintf("crawl %s is running: %s (stop them, or wait master.dead_after after a slave died)", e.Crawl, e.Running)
}
