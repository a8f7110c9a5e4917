package workapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/retry"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// watcher follows the crawl's rules channel (rule set versions and work
// announcements: frontier.WorkMessage) once per server, and wakes the
// watches waiting on it.
type watcher struct {
	mu      sync.Mutex
	rules   string        // the version in force, "" before the first read
	known   bool          // rules was read
	changed chan struct{} // closed and replaced at each message
	work    uint64        // work announcements so far
}

func newWatcher() *watcher { return &watcher{changed: make(chan struct{})} }

// run reads the published version, then follows the channel, until ctx
// ends; an outage is a pause.
func (w *watcher) run(ctx context.Context, f Frontier, rl *ratelog.Logger) {
	for i := 1; ctx.Err() == nil; i++ {
		versions, stop, err := f.SubscribeRules(ctx)
		if err == nil {
			if v, _, _, gerr := f.GetRules(ctx); gerr == nil {
				w.set(v, false)
			}
			i = 0
			for v := range versions {
				w.set(v, v == frontier.WorkMessage)
			}
			stop()
			continue
		}
		rl.Log(ctx, slog.LevelWarn, "api-watch", "work API: follow the rules channel", "err", err)
		retry.Sleep(ctx, retry.Backoff(i))
	}
}

// set records a message and wakes the watches.
func (w *watcher) set(v string, work bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if work {
		w.work++
	} else {
		w.rules, w.known = v, true
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns at once when the version in force is not have or work was
// announced since the seq-th announcement (seen; nil: since now), else
// when either happens or ctx ends (nothing new).
func (w *watcher) wait(ctx context.Context, have string, seen *uint64) api.WatchResponse {
	w.mu.Lock()
	work0 := w.work
	if seen != nil {
		work0 = *seen
	}
	for {
		res := api.WatchResponse{Seq: w.work}
		if w.known && w.rules != have {
			res.Rules = w.rules
		}
		res.Work = w.work != work0
		if res.Rules != "" || res.Work {
			w.mu.Unlock()
			return res
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return res
		case <-ch:
		case <-time.After(time.Minute): // bounded: look again
		}
		w.mu.Lock()
	}
}
