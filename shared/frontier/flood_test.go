package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestRegistryFlood: a direct slave's Redis user may ZADD the registry and
// HSET its own lease data without bound. With 500,000 members in the
// registry and 200,000 fields in a slave's lease data, no function the
// master calls every cycle (recover_expired, finish) nor a slave's leave
// takes 10 ms (Redis's SLOWLOG, whose default threshold that is: a
// call that runs again with the same work, 3 times in a row), the
// honest slave's expired lease is still taken back, and PruneRegistry
// drops every member that is no slave, keeping the honest one.
func TestRegistryFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 700,000 members")
	}
	ctx := context.Background()
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "flood", func(o *frontier.Options) { o.LeaseDuration = 50 * time.Millisecond })
	k := f.Keys()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://b.test/1", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "honest"}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.ClaimWaitOpts(ctx, "honest", 1, frontier.ClaimOptions{}); err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	// the flood, as raw commands a slave's user may run: members older
	// than every slave (they sort first), and junk lease data
	pipe := rdb.Pipeline()
	for i := range 500_000 {
		pipe.ZAdd(ctx, k.Slaves, redis.Z{Score: float64(i % 1000), Member: fmt.Sprintf("junk-%d", i)})
		if i%10_000 == 9_999 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 200_000 {
		pipe.HSet(ctx, k.SlaveLeaseData("evil"), fmt.Sprintf("http://x.test/%d", i), "evil\t1\t0\tx.test\t0\t0\t0\t0\thttp://x.test/")
		if i%10_000 == 9_999 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // the honest lease expires
	// a call whose work is bounded takes 0.1-3 ms here, one that loops
	// over the flood hundreds; a busy machine can stretch the first
	// several times over, so a call that may run again (they change
	// nothing the next one reads) counts as slow only when it is slow 3
	// times in a row
	for _, c := range []struct {
		name   string
		repeat bool
		call   func() error
	}{
		{"recover_expired", true, func() error { _, err := f.RecoverExpired(ctx, 1000); return err }},
		{"finish", true, func() error { _, err := f.CheckFinished(ctx, time.Second); return err }},
		{"registry", true, func() error { _, err := f.Registered(ctx); return err }},
		{"retire", false, func() error { _, err := f.RecoverSlave(ctx, "evil"); return err }},
	} {
		slow := 0
		for range 3 {
			before := slowCalls(t, rdb, k.Meta)
			if err := c.call(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if slowCalls(t, rdb, k.Meta) == before {
				slow = 0
				break
			}
			slow++
			if !c.repeat {
				break
			}
		}
		if slow > 0 {
			t.Errorf("%s took over 10 ms with the registry flooded (%d times in a row)", c.name, slow)
		}
	}
	if n, err := rdb.Exists(ctx, k.SlaveLeaseData("evil")).Result(); err != nil || n != 0 {
		t.Errorf("the flooded lease data is still there: %d %v", n, err)
	}
	// the flood is pruned; the honest slave stays
	n, err := f.PruneRegistry(ctx, nil)
	if err != nil || n != 500_000 {
		t.Errorf("pruned %d members (%v), want the 500,000 junk ones", n, err)
	}
	if _, err := rdb.ZScore(ctx, k.Slaves, "honest").Result(); err != nil {
		t.Errorf("the honest slave left the registry: %v", err)
	}
	// with the registry whole again, the honest slave's expired lease is
	// taken back
	if n, err := f.RecoverExpired(ctx, 1000); err != nil || n != 1 {
		t.Errorf("recovered %d leases (%v), want the honest slave's expired one", n, err)
	}
}

// slowCalls counts the SLOWLOG entries of calls naming key (a crawl's
// meta key: every function call names it).
func slowCalls(t *testing.T, rdb *redis.Client, key string) int {
	t.Helper()
	logs, err := rdb.SlowLogGet(context.Background(), 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range logs {
		for _, a := range l.Args {
			if a == key {
				n++
				t.Logf("slow: %v (%v)", l.Args[:min(len(l.Args), 4)], l.Duration)
				break
			}
		}
	}
	return n
}

// TestLinkCapsBeforeSeen: a link a cap drops (the host's page cap) does
// not enter the seen set, so links a slave makes up to fill a host's cap
// never make a real page of it known and unfetched.
func TestLinkCapsBeforeSeen(t *testing.T) {
	ctx := context.Background()
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "capseen", func(o *frontier.Options) { o.MaxPagesPerHost = 3; o.HostConcurrency = 100 })
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s1", 1, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	ls := res.Leases
	var links []frontier.Task
	for i := range 10 {
		links = append(links, tk(fmt.Sprintf("http://a.test/made-up/%d", i), 1))
	}
	links = append(links, tk("http://a.test/real", 1))
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
		t.Fatal(err)
	}
	seen, err := f.MaybeSeen(ctx, []string{"http://a.test/made-up/0", "http://a.test/made-up/1", "http://a.test/made-up/9", "http://a.test/real"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false, false}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("seen %v, want %v: the links the host cap (3 pages: the seed and two links) dropped are not seen",
			seen, want)
	}
}
