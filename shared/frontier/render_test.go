package frontier_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestRenderTaskString checks what a queued URL costs: a static task string
// is unchanged, a render task's has one more byte, and both go to their
// class's keys (a host's one static task to the fresh hash).
func TestRenderTaskString(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "rstring", nil)
	r := tk("http://a.test/r", 2)
	r.Render = true
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/s", 2), r}); err != nil {
		t.Fatal(err)
	}
	k := f.Keys()
	// the host's one static task waits in the fresh hash: length:prio \t
	// depth \t hops \t attempt \t URL, the URL's http:// and host as h
	fresh, err := rdb.HGet(ctx, k.Fresh, "a.test").Result()
	if err != nil {
		t.Fatal(err)
	}
	static := []string{fresh}
	render, err := rdb.LRange(ctx, k.RenderQueue("a.test", 2), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([][]string{{"11:2\t2\t0\t0\th/s"}, {"r2\t0\t0\thttp://a.test/r"}}, [][]string{static, render}); d != "" {
		t.Fatalf("queued task strings (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		key  string
		want bool
	}{{k.Ready, false}, {k.RenderReady, true}, {k.Prios("a.test"), false}, {k.RenderPrios("a.test"), true}} {
		if n, _ := rdb.Exists(ctx, tc.key).Result(); (n == 1) != tc.want {
			t.Errorf("%s exists %v, want %v", tc.key, n == 1, tc.want)
		}
	}
}

// policyKeys are the hashes a host policy writes.
func policyKeys(f *frontier.Redis) []string {
	k := f.Keys()
	return []string{k.HostConc, k.HostJitter, k.HostPDelay}
}

// unwritten runs fn while WATCHing keys and reports whether fn wrote to
// any of them (a WATCHed key that is modified, even to the same value,
// aborts the transaction): MONITOR-free write detection.
func unwritten(t *testing.T, rdb *redis.Client, keys []string, fn func()) bool {
	t.Helper()
	ctx := context.Background()
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		fn()
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Ping(ctx)
			return nil
		})
		return err
	}, keys...)
	if errors.Is(err, redis.TxFailedErr) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestHostPolicyStoredAndNoRewrite(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "policy", nil)
	k := f.Keys()
	pol := map[string]frontier.HostPolicy{
		"a.test": {Delay: 1500 * time.Millisecond, Jitter: 0.25, Concurrency: 4},
		"b.test": {Jitter: 0},
		"c.test": {Jitter: -1, Concurrency: 2},
	}
	seed := func(p map[string]frontier.HostPolicy, ts ...frontier.Task) {
		t.Helper()
		if _, err := f.SeedWithPolicies(ctx, ts, p); err != nil {
			t.Fatal(err)
		}
	}
	seed(pol, tk("http://a.test/", 0))
	type hashes struct{ Conc, Jitter, Delay map[string]string }
	read := func() hashes {
		t.Helper()
		var h hashes
		for _, x := range []struct {
			key string
			dst *map[string]string
		}{{k.HostConc, &h.Conc}, {k.HostJitter, &h.Jitter}, {k.HostPDelay, &h.Delay}} {
			m, err := rdb.HGetAll(ctx, x.key).Result()
			if err != nil {
				t.Fatal(err)
			}
			*x.dst = m
		}
		return h
	}
	want := hashes{
		Conc:   map[string]string{"a.test": "4", "c.test": "2"},
		Jitter: map[string]string{"a.test": "0.25", "b.test": "0"},
		Delay:  map[string]string{"a.test": "1500"},
	}
	if d := cmp.Diff(want, read()); d != "" {
		t.Fatalf("policy hashes (-want +got):\n%s", d)
	}

	// the same policies again, by seed and by completion: no write
	if !unwritten(t, rdb, policyKeys(f), func() { seed(pol) }) {
		t.Fatal("seeding an unchanged policy wrote to the policy hashes")
	}
	ls, err := claimN(ctx, f, "s1", 5)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %d %v", len(ls), err)
	}
	if !unwritten(t, rdb, policyKeys(f), func() {
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Policies: pol}}); err != nil {
			t.Fatal(err)
		}
	}) {
		t.Fatal("completing with an unchanged policy wrote to the policy hashes")
	}
	// a change is written; back to the defaults removes the fields
	if unwritten(t, rdb, policyKeys(f), func() { seed(map[string]frontier.HostPolicy{"b.test": {Jitter: 0.5}}) }) {
		t.Fatal("a changed policy was not written")
	}
	seed(map[string]frontier.HostPolicy{"a.test": {Jitter: -1}, "c.test": {Jitter: -1}})
	want = hashes{Conc: map[string]string{}, Jitter: map[string]string{"b.test": "0.5"}, Delay: map[string]string{}}
	if d := cmp.Diff(want, read()); d != "" {
		t.Fatalf("policy hashes after reset (-want +got):\n%s", d)
	}
}

// TestHostPolicyJitter compares the next allowed time a claim stores with
// the lease time: a host's policy jitter replaces the crawl's.
func TestHostPolicyJitter(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	const delay = 100 // ms
	f := newFrontier(t, rdb, "pjitter", func(o *frontier.Options) { o.Delay, o.Jitter = delay*time.Millisecond, 0.5 })
	var seeds []frontier.Task
	pol := map[string]frontier.HostPolicy{}
	for h := range 20 {
		host := fmt.Sprintf("h%d.test", h)
		seeds = append(seeds, tk("http://"+host+"/", 0))
		if h%2 == 0 {
			pol[host] = frontier.HostPolicy{Jitter: 0} // none
		} else {
			pol[host] = frontier.HostPolicy{Jitter: 4, Delay: 2 * delay * time.Millisecond}
		}
	}
	if _, err := f.SeedWithPolicies(ctx, seeds, pol); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 20)
	if err != nil || len(ls) != 20 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	wide := 0
	for _, l := range ls {
		nxt, err := rdb.HGet(ctx, f.Keys().HostNext, l.Host).Int64()
		if err != nil {
			t.Fatal(err)
		}
		gap := nxt - l.LeasedAt.UnixMilli() - 1 // +1 ms rounding (after)
		p := pol[l.Host]
		d := p.Delay.Milliseconds()
		if d == 0 {
			d = delay
		}
		if p.Jitter == 0 && gap != d {
			t.Errorf("%s: gap %d ms, want exactly the delay %d (policy jitter 0)", l.Host, gap, d)
		}
		if p.Jitter > 0 && (gap < d || gap > d*5) {
			t.Errorf("%s: gap %d ms, want within [%d, %d]", l.Host, gap, d, d*5)
		}
		if gap > d*3/2 {
			wide++ // beyond the crawl's jitter of 0.5
		}
	}
	if wide == 0 {
		t.Error("no gap beyond the crawl's jitter: the policy jitter was not used")
	}
}

func TestRulesVersion(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "rules", nil)
	if _, _, ok, err := f.GetRules(ctx); ok || err != nil {
		t.Fatalf("rules before any put: %v %v", ok, err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s1", 5, frontier.ClaimOptions{})
	if err != nil || res.RulesVersion != "" {
		t.Fatalf("claim before any put: %+v %v", res, err)
	}
	for _, v := range []string{"", frontier.WorkMessage} {
		if err := f.PutRules(ctx, v, []byte("x")); err == nil {
			t.Fatalf("version %q accepted", v)
		}
	}
	versions, stop, err := f.SubscribeRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	type rules struct {
		Version string
		Blob    string
	}
	var got []rules
	var msgs []string
	for _, r := range []rules{{"v1", "sites: []\n"}, {"v2", "sites:\n  - host: a.test\n"}} {
		if err := f.PutRules(ctx, r.Version, []byte(r.Blob)); err != nil {
			t.Fatal(err)
		}
		v, blob, ok, err := f.GetRules(ctx)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		got = append(got, rules{v, string(blob)})
		next := func(what string) string {
			t.Helper()
			select {
			case m := <-versions:
				return m
			case <-time.After(10 * time.Second):
				t.Fatalf("no message for %s on %s", what, f.RulesChannel())
				return ""
			}
		}
		msgs = append(msgs, next(r.Version))
		// a seed announces work on the same channel
		if _, err := f.Seed(ctx, []frontier.Task{tk("http://"+r.Version+".test/", 0)}); err != nil {
			t.Fatal(err)
		}
		if m := next("the seed"); m != frontier.WorkMessage {
			t.Fatalf("message after a seed: %q, want %q", m, frontier.WorkMessage)
		}
		res, err := f.ClaimWaitOpts(ctx, "s1", 5, frontier.ClaimOptions{Render: true})
		if err != nil || len(res.Leases) != 1 || res.RulesVersion != r.Version {
			t.Fatalf("claim after put %s: %+v %v", r.Version, res, err)
		}
	}
	if d := cmp.Diff([]rules{{"v1", "sites: []\n"}, {"v2", "sites:\n  - host: a.test\n"}}, got); d != "" {
		t.Fatalf("stored rules (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"v1", "v2"}, msgs); d != "" {
		t.Fatalf("published versions (-want +got):\n%s", d)
	}
	if ch := f.RulesChannel(); ch != f.Keys().Prefix+"rules:changed" {
		t.Fatalf("channel %q", ch)
	}
	stop()
	if _, ok := <-versions; ok {
		t.Fatal("channel still open after stop")
	}
}

func TestStatsRenderSlaves(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "rslaves", func(o *frontier.Options) { o.DeadAfter = time.Minute })
	for _, s := range []string{"plain", "browser1", "browser2"} {
		if err := f.Heartbeat(ctx, events.Heartbeat{Slave: s}); err != nil {
			t.Fatal(err)
		}
	}
	// the heartbeat JSON as a render-capable slave writes it
	now, err := f.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"browser1", "browser2"} {
		beat := strconv.FormatInt(now.UnixMilli(), 10) + "\t" + `{"slave":"` + s + `","render":true}`
		if err := rdb.Set(ctx, f.Keys().SlaveBeat(s), beat, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.SlavesAlive != 3 || st.RenderSlaves != 2 {
		t.Fatalf("stats slaves_alive=%d render_slaves=%d, want 3 2", st.SlavesAlive, st.RenderSlaves)
	}
}
