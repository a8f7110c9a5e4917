package masterd

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// librarian keeps the frontier's functions library on every primary: a
// node that joined a Redis Cluster (a slot moved to it) or a Redis that
// restarted without its data has none, and a slave's call there fails
// until a master loads it. Functions replicate, so a replica promoted by
// a failover has them already. The master's own calls load the library
// where they find it missing; this also covers nodes only slaves call.
type librarian struct {
	rdb   redis.UniversalClient
	every time.Duration
	log   *slog.Logger
	rl    *ratelog.Logger
}

// libraryCheck is how often the librarian looks: one FUNCTION LIST per
// primary.
const libraryCheck = 15 * time.Second

func (l *librarian) run(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := frontier.LoadLibrary(ctx, l.rdb); err != nil {
			if ctx.Err() == nil {
				l.rl.Log(ctx, slog.LevelWarn, "library", "load the frontier's functions library", "err", err)
			}
			continue
		}
		if l.rl.Reset("library") {
			l.log.Info("frontier's functions library loaded", "library", frontier.LibraryName())
		}
	}
}
