package frontier

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// checkRedis connects to the test Redis (REDCRAWL_TEST_REDIS).
func checkRedis(t testing.TB) *redis.Client {
	t.Helper()
	u := os.Getenv("REDCRAWL_TEST_REDIS")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", u, err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// checkCrawl opens a crawl of one shard that scopes links by
// crawl.allow_hosts (a.test and *.b.test) and crawl.max_depth 3, with two
// seeds, and returns its frontier and a lease of s1's.
func checkCrawl(t testing.TB, rdb *redis.Client, mod func(*Options)) (*Redis, Lease) {
	t.Helper()
	ctx := context.Background()
	crawl := testutil.CrawlName("checks")
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	opt := Options{Crawl: crawl, HostConcurrency: 2, LeaseDuration: time.Minute, MaxAttempts: 3,
		AllowHosts: []string{"a.test", "*.b.test"}, MaxDepth: 3}
	if mod != nil {
		mod(&opt)
	}
	f, err := NewRedis(ctx, rdb, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed(ctx, []Task{checkTask("http://a.test/1", 0), checkTask("http://a.test/2", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	return f, ls[0]
}

func checkTask(raw string, depth int) Task {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return Task{URL: raw, Host: u.Host, ScopeHost: u.Hostname(), Depth: depth, Priority: int64(depth)}
}

// crawlState is what a refused call must leave as it was: the crawl's
// stats, its queues' lengths, the slave's leases and the events written.
func crawlState(t *testing.T, rdb *redis.Client, f *Redis) string {
	t.Helper()
	ctx := context.Background()
	k := f.Keys()
	var b strings.Builder
	stats, err := rdb.HGetAll(ctx, k.Stats).Result()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "stats %v\n", stats)
	iter := rdb.Scan(ctx, 0, k.Prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for _, key := range sortedStrings(keys) {
		typ := rdb.Type(ctx, key).Val()
		var n int64
		switch typ {
		case "list":
			n = rdb.LLen(ctx, key).Val()
		case "zset":
			n = rdb.ZCard(ctx, key).Val()
		case "hash":
			n = rdb.HLen(ctx, key).Val()
		case "set":
			n = rdb.SCard(ctx, key).Val()
		case "stream":
			n = rdb.XLen(ctx, key).Val()
		}
		fmt.Fprintf(&b, "%s %s %d\n", key, typ, n)
	}
	return b.String()
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// completion returns the function complete's ARGV (after the prefix) for
// one completion of l, edited by edit (index from the completion's url).
func completionArgs(t *testing.T, f *Redis, l Lease, links []Task, edit func(args []any) []any) []any {
	t.Helper()
	args, _, err := f.shards[0].completeArgs("s1", []Completion{{Lease: l, Outcome: Done, Links: links,
		Events: []Event{{Type: "page", Data: []byte(`{"url":"` + l.URL + `"}`)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		args = edit(args)
	}
	return args
}

// TestFunctionsRefuse: every function checks what it is given before it
// writes: a call with arguments out of form or out of bounds fails with
// "ERR redcrawl: ..." and leaves the crawl as it was.
func TestFunctionsRefuse(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, nil)
	other, _ := checkCrawl(t, rdb, nil)
	link := checkTask("http://a.test/3", 1)
	set := func(i int, v any) func([]any) []any {
		return func(a []any) []any { a = append([]any(nil), a...); a[i] = v; return a }
	}
	// indexes in completionArgs (after the prefix): slave 0, seed 1, n 2,
	// then url 3, token 4, outcome 5, host_delay 6, backoff 7, retry_in 8,
	// reason 9, content hash 10, bucket 11, field 12, n_events 13,
	// n_links 14, n_policies 15, event type 16, event data 17, links 18...
	for _, tc := range []struct {
		name string
		fn   string
		keys []string // nil: the crawl's meta
		args []any    // after the prefix
		want string   // in the error
	}{
		{"claim: max over the cap", "claim", nil, []any{"s1", maxClaim + 1, 1, 0, 0}, "max must be a whole number in [1, 1000]"},
		{"claim: max not a number", "claim", nil, []any{"s1", "ten", 1, 0, 0}, "max must be"},
		{"claim: render not a flag", "claim", nil, []any{"s1", 1, 1, "yes", 0}, "render must be 0 or 1"},
		{"claim: too few arguments", "claim", nil, []any{"s1", 1}, "want 6 arguments, got 3"},
		{"claim: a slave id with a glob", "claim", nil, []any{"s*", 1, 1, 0, 0}, "not a slave id"},
		{"claim: another crawl's prefix", "claim", []string{other.Keys().Meta}, []any{"s1", 1, 1, 0, 0}, "meta key"},
		{"complete: n past the completions", "complete", nil, completionArgs(t, f, l, nil, set(2, 2)), "completion 2 runs past"},
		{"complete: unknown outcome", "complete", nil, completionArgs(t, f, l, nil, set(5, "steal")), "unknown outcome"},
		{"complete: unknown event type", "complete", nil, completionArgs(t, f, l, nil, set(16, "item; DROP")), "unknown event type"},
		{"complete: event over the cap", "complete", nil, completionArgs(t, f, l, nil, set(17, strings.Repeat("x", maxEventBytes+1))), "event longer than"},
		{"complete: reason over the cap", "complete", nil, completionArgs(t, f, l, nil, set(9, strings.Repeat("r", maxReasonBytes+1))), "reason longer than"},
		{"complete: negative link count", "complete", nil, completionArgs(t, f, l, nil, set(14, -1)), "counts must be whole numbers"},
		{"complete: links past the arguments", "complete", nil, completionArgs(t, f, l, nil, set(14, 3)), "links run past"},
		{"complete: arguments after the last", "complete", nil, completionArgs(t, f, l, nil, func(a []any) []any { return append(a, "x") }), "arguments follow"},
		{"complete: more completions than the cap", "complete", nil, completionArgs(t, f, l, nil, set(2, maxCompletions+1)), "n must be"},
		{"complete: malformed content hash", "complete", nil, completionArgs(t, f, l, nil, set(10, "abc")), "malformed content hash"},
		{"complete_claim: max over the cap", "complete_claim", nil, completionArgs(t, f, l, nil, func(a []any) []any { return append(a, maxClaim+1, 0, 0) }), "max must be"},
		{"extend: count and pairs disagree", "extend", nil, []any{"s1", 2, l.URL, l.Token}, "want 7 arguments"},
		{"heartbeat: not JSON", "heartbeat", nil, []any{"s1", "{not json", "box"}, "not a JSON object"},
		{"heartbeat: over the cap", "heartbeat", nil, []any{"s1", `{"x":"` + strings.Repeat("y", maxHeartbeatBytes) + `"}`, "box"}, "longer than"},
		{"links: policy concurrency out of range", "links", nil, append([]any{"s1", 1, 0}, "a.test", "", "", 100000), "policy concurrency"},
		{"links: tuples past the arguments", "links", nil, append([]any{"s1", 0, 2}, f.shards[0].appendTuples(nil, []Task{link})...), "want"},
		{"seed: count over the cap", "seed", nil, []any{seedBatch + 1, 0}, "n must be"},
		{"recover_expired: limit over the cap", "recover_expired", nil, []any{maxRecover + 1, 0}, "limit must be"},
		{"recover_expired: from past the registry", "recover_expired", nil, []any{10, maxSlaves + 1}, "from must be"},
		{"retire: unknown kind", "retire", nil, []any{"s1", "vanish", "", 1}, "kind must be"},
		{"finish: quiescence not a number", "finish", nil, []any{"soon"}, "quiescence_ms must be"},
		{"shard_count: over the cap", "shard_count", nil, []any{maxShards + 1, "", keyLayout}, "shards must be"},
		{"init: unknown strategy", "init", nil, []any{"random", "exact", 0, 0, 0, 12, keyLayout}, "unknown strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := crawlState(t, rdb, f)
			keys := tc.keys
			if keys == nil {
				keys = []string{f.Keys().Meta}
			}
			err := rdb.FCall(ctx, lib.fn(tc.fn), keys, append([]any{f.Keys().Prefix}, tc.args...)...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "ERR redcrawl: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ERR redcrawl: ...%s...", err, tc.want)
			}
			if d := cmp.Diff(before, crawlState(t, rdb, f)); d != "" {
				t.Errorf("a refused call changed the crawl (-before +after):\n%s", d)
			}
		})
	}
}

// TestFunctionsRefuseLinks: a link is checked before it is queued: one out
// of crawl.allow_hosts or deeper than crawl.max_depth is dropped; one whose
// host is not its URL's, or whose task has another form, is refused,
// counted (stats refused) and recorded once per call as an invalid_input
// exception on the slave's stream; the page is still acked.
func TestFunctionsRefuseLinks(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, nil)
	good := checkTask("http://a.test/ok", 1)
	sub := checkTask("http://x.b.test/ok", 1)
	outside := checkTask("http://c.test/out", 1)
	deep := checkTask("http://a.test/deep", 4)
	elsewhere := checkTask("http://a.test/mine", 1)
	elsewhere.Host = "c.test" // queued under another host's politeness
	userinfo := checkTask("http://u:p@a.test/ui", 1)
	userinfo.Host, userinfo.ScopeHost = "a.test", "a.test"
	acked, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done,
		Links: []Task{good, sub, outside, deep, elsewhere, userinfo}}})
	if err != nil || len(acked) != 1 || !acked[0] {
		t.Fatalf("complete: %v, %v", acked, err)
	}
	// a task of another form, sent raw (the Go side never builds one)
	tuple := f.shards[0].appendTuples(nil, []Task{checkTask("http://a.test/raw", 1)})
	tuple[5] = "1\tx\t0\thttp://a.test/raw"
	if _, err := rdb.FCall(ctx, lib.fn("links"), []string{f.Keys().Meta},
		append([]any{f.Keys().Prefix, "s1", 0, 1}, tuple...)...).Result(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refused, _ := rdb.HGet(ctx, f.Keys().Stats, "refused").Int()
	// seeds 2, then good, sub and userinfo
	if st.Seen != 5 || refused != 2 {
		t.Errorf("seen %d, refused %d; want 5 and 2", st.Seen, refused)
	}
	var got []string
	for {
		ls, err := claimN(ctx, f, "s1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			got = append(got, l.URL)
			if _, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"http://a.test/2", "http://a.test/ok", "http://u:p@a.test/ui", "http://x.b.test/ok"}
	if d := cmp.Diff(want, sortedStrings(got)); d != "" {
		t.Errorf("claimed (-want +got):\n%s", d)
	}
	evs, err := rdb.XRange(ctx, f.Keys().SlaveEvents("s1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var invalid []string
	for _, e := range evs {
		for k, v := range e.Values {
			s, _ := v.(string)
			if strings.HasPrefix(k, "d") && strings.Contains(s, `"invalid_input"`) {
				var m map[string]any
				if err := json.Unmarshal([]byte(s), &m); err != nil {
					t.Fatal(err)
				}
				invalid = append(invalid, fmt.Sprint(m["slave"], ": ", m["message"]))
			}
		}
	}
	wantInvalid := []string{"s1: refused by the frontier: host c.test is not the URL's", "s1: refused by the frontier: malformed task"}
	if d := cmp.Diff(wantInvalid, invalid); d != "" {
		t.Errorf("invalid_input exceptions (-want +got):\n%s", d)
	}
}

// FuzzFunctionArgs feeds the library's functions random arguments: a call
// either works or fails with "ERR redcrawl: ..." (or NOPERM) before it
// writes anything; never a Lua error half way (a runtime error, or a
// command of the function refused by Redis), which would leave a partial
// write. The input is the function's index, then its arguments separated
// by NUL bytes; the seeds are honest calls.
func FuzzFunctionArgs(f *testing.F) {
	rdb := checkRedis(f)
	ctx := context.Background()
	front, l := checkCrawl(f, rdb, nil)
	k := front.Keys()
	fns := []string{"claim", "complete", "complete_claim", "extend", "links", "heartbeat", "leave", "seed",
		"reseed", "requeue_failed", "recover_expired", "retire", "drain", "finish", "finish_sharded", "idle",
		"seen_has", "member_bit", "own", "masters", "drop_stream", "registry", "snapshot", "memory"}
	index := map[string]byte{}
	for i, fn := range fns {
		index[fn] = byte(i)
	}
	add := func(fn string, args ...any) {
		var b bytes.Buffer
		b.WriteByte(index[fn])
		for i, a := range args {
			if i > 0 {
				b.WriteByte(0)
			}
			fmt.Fprint(&b, a)
		}
		f.Add(b.Bytes())
	}
	link := checkTask("http://a.test/f", 1)
	cargs, _, err := front.shards[0].completeArgs("s1", []Completion{{Lease: l, Outcome: Done, Links: []Task{link},
		Events: []Event{{Type: "page", Data: []byte(`{}`)}}, ContentHash: 0x1234567812345678}})
	if err != nil {
		f.Fatal(err)
	}
	add("complete", cargs...)
	add("complete_claim", append(cargs, 2, 1, 0)...)
	add("claim", "s1", 3, 7, 1, 0)
	add("extend", "s1", 1, l.URL, l.Token)
	add("links", append([]any{"s1", 1, 1, "a.test", "10", "0.5", "2"}, front.shards[0].appendTuples(nil, []Task{link})...)...)
	add("heartbeat", "s1", `{"slave":"s1","host":"box"}`, "box")
	add("leave", "s1", "bye", 1)
	add("seed", append([]any{1, 0}, front.shards[0].appendTuples(nil, []Task{checkTask("http://a.test/s", 0)})...)...)
	add("reseed", append(append([]any{1, 0}, front.shards[0].appendTuples(nil, []Task{checkTask("http://a.test/s", 0)})...), "")...)
	add("requeue_failed", 10)
	add("recover_expired", 10, 0)
	add("retire", "s2", "death", "gone", 1)
	add("drain", "s2")
	add("finish", 0)
	add("finish_sharded", 1, "1,", 0)
	add("idle")
	add("seen_has", 1, "12", "34")
	add("member_bit", "123456789", 3)
	add("own", "m1", 1000, 1)
	add("masters", "m1", 1000)
	add("drop_stream", "s9")
	add("registry")
	add("snapshot")
	add("memory", "")
	add("memory", k.Prefix)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 1<<16 {
			return
		}
		fn := fns[int(data[0])%len(fns)]
		args := []any{k.Prefix}
		if len(data) > 1 {
			for _, a := range bytes.Split(data[1:], []byte{0}) {
				args = append(args, string(a))
			}
		}
		err := rdb.FCall(ctx, lib.fn(fn), []string{k.Meta}, args...).Err()
		if err == nil || err == redis.Nil {
			return
		}
		if s := err.Error(); !strings.HasPrefix(s, "ERR redcrawl: ") && !strings.HasPrefix(s, "NOPERM") {
			t.Fatalf("%s(%q): %v", fn, args[1:], err)
		}
	})
}

// TestFunctionsSurviveRawWrites: what a slave's Redis user can write raw
// into the shared keys (a task no function checked on a host's queue, a
// retry, a failed entry, its own lease data) is dropped and counted by the
// functions that read it, which go on for everything else: no claim,
// requeue or recovery fails half way on it.
func TestFunctionsSurviveRawWrites(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, nil)
	k := f.Keys()
	if _, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}); err != nil {
		t.Fatal(err)
	}
	now := float64(time.Now().UnixMilli())
	raw := []error{
		// a task without its fields on a.test's queue of priority 0
		rdb.RPush(ctx, k.Queue("a.test", 0), "garbage").Err(),
		rdb.ZAdd(ctx, k.Retry, redis.Z{Score: 0, Member: "a.test\tnot-a-prio\tgarbage"}).Err(),
		rdb.RPush(ctx, k.Failed, "reason\ta.test").Err(),
		rdb.ZAdd(ctx, k.SlaveLease("s2"), redis.Z{Score: now - 60000, Member: "http://a.test/x"}).Err(),
		rdb.HSet(ctx, k.SlaveLeaseData("s2"), "http://a.test/x", "s2\tno fields").Err(),
		rdb.ZAdd(ctx, k.Slaves, redis.Z{Score: now, Member: "s2"}).Err(),
	}
	for _, err := range raw {
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 10 {
		ls, err := claimN(ctx, f, "s1", 10)
		if err != nil {
			t.Fatalf("claim beside raw writes: %v", err)
		}
		for _, l := range ls {
			got = append(got, l.URL)
			if _, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}); err != nil {
				t.Fatal(err)
			}
		}
		if len(ls) == 0 {
			break
		}
	}
	if d := cmp.Diff([]string{"http://a.test/2"}, got); d != "" {
		t.Errorf("claimed (-want +got):\n%s", d)
	}
	if n, err := f.RequeueFailed(ctx, 10); err != nil || n != 0 {
		t.Errorf("requeue failed beside a raw entry: %d, %v", n, err)
	}
	if n, err := f.RecoverExpired(ctx, 10); err != nil || n != 1 {
		t.Errorf("recover beside raw lease data: %d, %v", n, err)
	}
	refused, _ := rdb.HGet(ctx, k.Stats, "refused").Int()
	if refused != 4 {
		t.Errorf("refused %d, want 4 (queue, retry, failed, lease data)", refused)
	}
	if done, err := f.CheckFinished(ctx, 0); err != nil {
		t.Fatal(err)
	} else if st, _ := f.Stats(ctx); st.Queued != 0 || st.InFlight != 0 {
		t.Errorf("after the raw writes were dropped: %d queued, %d in flight (finished %v)", st.Queued, st.InFlight, done)
	}
}

// TestClaimMaxHeld: a claim with MaxHeld (the work API's per-token cap)
// leases no more than keeps the slave within it, and answers busy at the
// cap; an ack frees room in the same call.
func TestClaimMaxHeld(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, func(o *Options) { o.AllowHosts = nil })
	var seeds []Task
	for i := range 5 {
		seeds = append(seeds, checkTask(fmt.Sprintf("http://h%d.test/", i), 0))
	}
	if _, err := f.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	opts := ClaimOptions{MaxHeld: 3}
	res, err := f.ClaimWaitOpts(ctx, "s1", 10, opts)
	if err != nil || len(res.Leases) != 2 {
		t.Fatalf("claim holding 1 of 3: %d leases, %v", len(res.Leases), err)
	}
	res, err = f.ClaimWaitOpts(ctx, "s1", 10, opts)
	if err != nil || len(res.Leases) != 0 || !res.Busy {
		t.Fatalf("claim at the cap: %d leases, busy %v, %v", len(res.Leases), res.Busy, err)
	}
	acked, res, err := f.CompleteClaim(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}, 10, opts)
	if err != nil || !acked[0] || len(res.Leases) != 1 {
		t.Fatalf("ack and claim at the cap: %v, %d leases, %v", acked, len(res.Leases), err)
	}
}

// TestWakeWaiters: a claim that came short, answered busy (work in
// flight, nothing claimable), marks the shard; the ack that makes a host claimable then
// announces work on the work channel, once; with no slave waiting nothing
// is published.
func TestWakeWaiters(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, func(o *Options) { o.HostConcurrency = 1 })
	ps := rdb.Subscribe(ctx, f.Keys().WorkChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := ps.Channel()
	got := func(wait time.Duration) int {
		n := 0
		deadline := time.After(wait)
		for {
			select {
			case <-msgs:
				n++
			case <-deadline:
				return n
			}
		}
	}
	// a.test/2 is queued, a.test is at its concurrency: busy
	res, err := f.ClaimWaitOpts(ctx, "s2", 5, ClaimOptions{})
	if err != nil || len(res.Leases) != 0 || !res.Busy {
		t.Fatalf("claim: %+v, %v; want busy", res, err)
	}
	if _, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}); err != nil {
		t.Fatal(err)
	}
	if n := got(500 * time.Millisecond); n != 1 {
		t.Errorf("work announced %d times after the ack a waiting slave needed, want 1", n)
	}
	// nobody waits now (a claim that got all it asked for): the next ack
	// publishes nothing
	ls, err := claimN(ctx, f, "s2", 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	if _, err := f.Complete(ctx, "s2", []Completion{{Lease: ls[0], Outcome: Done,
		Links: []Task{checkTask("http://a.test/3", 1)}}}); err != nil {
		t.Fatal(err)
	}
	if n := got(300 * time.Millisecond); n != 0 {
		t.Errorf("work announced %d times with no slave waiting", n)
	}
}

// TestWakeWaitersUntil: a claim's hint counts a retry's due time, the mark
// holds the time the short claim's slave looks again, and only a host made
// claimable before that time is announced.
func TestWakeWaitersUntil(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, l := checkCrawl(t, rdb, func(o *Options) { o.HostConcurrency = 1 })
	ps := rdb.Subscribe(ctx, f.Keys().WorkChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := ps.Channel()
	got := func(wait time.Duration) int {
		n := 0
		deadline := time.After(wait)
		for {
			select {
			case <-msgs:
				n++
			case <-deadline:
				return n
			}
		}
	}
	// a.test/1 comes back in 3 s; a.test/2 is claimable at once
	if _, err := f.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Retry, RetryIn: 3 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s2", 5, ClaimOptions{})
	if err != nil || len(res.Leases) != 1 || res.Wait < 2*time.Second || res.Wait > 3*time.Second {
		t.Fatalf("claim: %d leases, wait %v, %v; want 1 and the retry's due time (about 3 s)", len(res.Leases), res.Wait, err)
	}
	// a host ready now, before the retry: announced
	if _, err := f.Seed(ctx, []Task{checkTask("http://x.b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	if n := got(300 * time.Millisecond); n != 1 {
		t.Errorf("a host ready before the waiter looks again announced %d times, want 1", n)
	}
	res, err = f.ClaimWaitOpts(ctx, "s2", 5, ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %d leases, %v", len(res.Leases), err)
	}
	// a host ready only after the waiter looks again (a 10 s backoff): not
	// announced
	if _, err := f.Complete(ctx, "s2", []Completion{{Lease: res.Leases[0], Outcome: Done, Backoff: 10 * time.Second,
		Links: []Task{checkTask("http://x.b.test/2", 1)}}}); err != nil {
		t.Fatal(err)
	}
	if n := got(300 * time.Millisecond); n != 0 {
		t.Errorf("a host ready after the waiter looks again announced %d times, want 0", n)
	}
}

// TestWakeWaitersRecovered: a lease taken back after its deadline makes its
// host claimable again, which a waiting slave hears of.
func TestWakeWaitersRecovered(t *testing.T) {
	rdb := checkRedis(t)
	ctx := context.Background()
	f, _ := checkCrawl(t, rdb, func(o *Options) { o.HostConcurrency = 1; o.LeaseDuration = 300 * time.Millisecond })
	ps := rdb.Subscribe(ctx, f.Keys().WorkChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// a.test is at its concurrency (s1's lease): s2 waits
	res, err := f.ClaimWaitOpts(ctx, "s2", 5, ClaimOptions{})
	if err != nil || len(res.Leases) != 0 || !res.Busy {
		t.Fatalf("claim: %+v, %v; want busy", res, err)
	}
	n := 0
	for deadline := time.Now().Add(10 * time.Second); n == 0; time.Sleep(50 * time.Millisecond) {
		if n, err = f.RecoverExpired(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("s1's lease not taken back 10 s after its deadline")
		}
	}
	select {
	case m := <-ps.Channel():
		if m.Payload != WorkMessage {
			t.Errorf("message %q, want %q", m.Payload, WorkMessage)
		}
	case <-time.After(5 * time.Second):
		t.Error("a lease taken back was not announced to the waiting slave")
	}
}
