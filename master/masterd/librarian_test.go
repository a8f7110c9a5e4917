package masterd

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// TestLibrarian: a Redis that lost the functions library (a node that
// joined a cluster, a restart without data) gets it back from the
// master's librarian within a check.
func TestLibrarian(t *testing.T) {
	srv := testutil.StartRedis(t, nil)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	l := &librarian{rdb: rdb, every: 20 * time.Millisecond, log: log, rl: ratelog.New(log, time.Minute)}
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx) }()
	defer func() { cancel(); <-done }()
	loaded := func() bool {
		libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: frontier.LibraryName()}).Result()
		return err == nil && len(libs) == 1
	}
	for round := range 2 {
		deadline := time.Now().Add(5 * time.Second)
		for !loaded() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !loaded() {
			t.Fatalf("round %d: no library after 5 s", round)
		}
		if err := rdb.FunctionDelete(ctx, frontier.LibraryName()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
