package frontier_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// monitor records the commands Redis runs (functions' own included) whose
// line names prefix, from a MONITOR connection, until stop is called.
func monitor(t *testing.T, rdb *redis.Client, prefix string) (stop func() []string) {
	t.Helper()
	opt := rdb.Options()
	conn, err := net.DialTimeout("tcp", opt.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// closed also when the test ends before stop: the reader then returns
	t.Cleanup(func() { conn.Close() })
	replies := 1 // +OK for MONITOR, and before it for AUTH
	if opt.Password != "" {
		user := opt.Username
		if user == "" {
			user = "default"
		}
		fmt.Fprintf(conn, "AUTH %s %s\r\n", user, opt.Password)
		replies++
	}
	fmt.Fprintf(conn, "MONITOR\r\n")
	r := bufio.NewReader(conn)
	for range replies {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	// a command after the calls, seen by the monitor, marks their end
	mark := prefix + "monitor-end"
	lines := make(chan []string, 1)
	go func() {
		var got []string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				lines <- nil
				return
			}
			if strings.Contains(l, mark) {
				lines <- got
				return
			}
			if strings.Contains(l, prefix) {
				got = append(got, strings.TrimSpace(l))
			}
		}
	}()
	return func() []string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		rdb.Exists(context.Background(), mark)
		got := <-lines
		conn.Close()
		if got == nil {
			t.Fatal("the monitor did not see the end mark")
		}
		return got
	}
}

// TestRareKeysHint checks FRESH.rare (lua/cache.lua) in a crawl that is
// not quiet (its fresh hash holds hosts) and has none of the rare keys:
// once a call has found so, a completion and claim asks about the rare
// keys in one EXISTS and makes none of their looks (no HMGET of the
// slaves' delays or the controls, no EXISTS of the validators), and a
// control written meanwhile (a pause) is still seen by the next claim.
// Its walk of the fresh hash starts where the last claim's stopped, a
// cursor the library keeps in memory (no HGET or HSET of meta).
func TestRareKeysHint(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "rarehint", nil)
	k := f.Keys()
	var seeds []frontier.Task
	for h := range 40 {
		seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", h), 0))
	}
	if _, err := f.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	// the first claim finds the crawl busy (the fresh hash) and sets the hint
	ls, err := claimN(ctx, f, "s1", 2)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	stop := monitor(t, rdb, k.Prefix)
	acked, res, err := f.CompleteClaim(ctx, "s1", []frontier.Completion{
		{Lease: ls[0], Outcome: frontier.Done, Links: []frontier.Task{tk("http://h0.test/a", 1)}},
		{Lease: ls[1], Outcome: frontier.Done}}, 2, frontier.ClaimOptions{})
	got := stop()
	if err != nil || len(acked) != 2 || !acked[0] || !acked[1] || len(res.Leases) != 2 {
		t.Fatalf("complete and claim: acked %v, %d leases, %v", acked, len(res.Leases), err)
	}
	q := func(key string) string { return `"` + key + `"` }
	rareExists := `"EXISTS" ` + strings.Join([]string{q(k.HostPDelay), q(k.HostJitter), q(k.HostConc), q(k.HostDelay),
		q(k.RenderReady), q(k.Validators), q(k.Control)}, " ")
	var rare int
	for _, l := range got {
		switch {
		case strings.Contains(l, rareExists):
			rare++
		case strings.Contains(l, `"HMGET" `+q(k.HostDelay)), strings.Contains(l, q(k.Control)),
			strings.Contains(l, `"EXISTS" `+q(k.Validators)), strings.Contains(l, `"EXISTS" `+q(k.RenderReady)),
			strings.Contains(l, q(k.Cool)+" "+q(k.Fresh)):
			t.Errorf("a look the rare keys' EXISTS stands for (or the quiet keys' EXISTS): %s", l)
		case strings.Contains(l, "fresh_cursor"):
			t.Errorf("the fresh hash's cursor is kept in the library's memory, not in meta: %s", l)
		}
	}
	if rare != 1 {
		t.Errorf("the rare keys' EXISTS ran %d times, want 1; the call's commands:\n%s", rare, strings.Join(got, "\n"))
	}

	// a pause while the hint holds: the next claim sees it
	if ok, err := f.Pause(ctx); err != nil || !ok {
		t.Fatalf("pause: %v, %v", ok, err)
	}
	acked, res, err = f.CompleteClaim(ctx, "s1", []frontier.Completion{
		{Lease: res.Leases[0], Outcome: frontier.Done}, {Lease: res.Leases[1], Outcome: frontier.Done}}, 2, frontier.ClaimOptions{})
	if err != nil || len(acked) != 2 || len(res.Leases) != 0 || res.Wait != time.Second {
		t.Fatalf("paused: acked %v, %d leases, wait %v, %v; want no lease and a wait of 1s", acked, len(res.Leases), res.Wait, err)
	}
	if ok, err := f.Resume(ctx); err != nil || !ok {
		t.Fatalf("resume: %v, %v", ok, err)
	}
	if ls, err := claimN(ctx, f, "s1", 2); err != nil || len(ls) != 2 {
		t.Fatalf("claim after resume: %d leases, %v", len(ls), err)
	}
}
