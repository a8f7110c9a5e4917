package slaved_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestExitWhenDone runs a slave for one crawl: it stays while the crawl is
// not finished (seeded, then crawled to the end), and leaves by itself,
// deregistered, once the master's finish decision is made (the test takes
// the master's part: CheckFinished).
func TestExitWhenDone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, _, closeAll := startSite(t, testsite.Options{Hosts: 1, PagesPerHost: 30, Seed: 5}, 0)
	defer closeAll()
	cfg := testConfig(t, site)
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	ctx := context.Background()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := slaved.New(cfg, slaved.Options{ID: "one-crawl", ExitWhenDone: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // no cancel: only the crawl's end ends it

	// no seed yet, then the whole crawl: the slave stays until the mark
	time.Sleep(5 * cfg.Slave.HeartbeatInterval)
	if _, err := f.Seed(ctx, siteSeeds(site)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		st, err := f.Stats(ctx)
		if err == nil && st.Done > 0 && st.Queued == 0 && st.InFlight == 0 && st.Retry == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not drained in a minute: %+v %v", st, err)
		}
	}
	time.Sleep(5 * cfg.Slave.HeartbeatInterval)
	select {
	case err := <-done:
		t.Fatalf("slave left before the crawl was finished: %v", err)
	default:
	}
	if fin, err := f.Finished(ctx); err != nil || fin {
		t.Fatalf("finished = %v, %v before the finish decision", fin, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fin, err := f.CheckFinished(ctx, 50*time.Millisecond); err == nil && fin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("crawl not finished in 30s")
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("slave did not leave within 30s of the crawl's end")
	}
	if ss, _ := f.Slaves(ctx); len(ss) != 0 {
		t.Errorf("slave still registered after leaving: %+v", ss)
	}
}
