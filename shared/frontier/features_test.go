package frontier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func newFrontier(t testing.TB, rdb *redis.Client, name string, mod func(*frontier.Options)) *frontier.Redis {
	t.Helper()
	o := frontier.Options{Crawl: uniqueCrawl(t, rdb, name), HostConcurrency: 1, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 10000}
	if mod != nil {
		mod(&o)
	}
	f, err := frontier.NewRedis(context.Background(), rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// contentHash is page n's content hash in the benchmarks: spread over the
// 64 bits as a real one is (small integers would all share one content
// bucket), distinct for distinct n.
func contentHash(n int) uint64 { return uint64(n+1) * 0x9E3779B97F4A7C15 }

func tk(raw string, depth int) frontier.Task {
	host := strings.SplitN(strings.TrimPrefix(raw, "http://"), "/", 2)[0]
	return frontier.Task{URL: raw, Host: host, ScopeHost: host, Depth: depth, Priority: int64(depth)}
}

// rawEvents reads the entries of one type of the crawl's stream and every
// slave's (in the registry or the streams set), decoded as JSON maps, in
// entry id order.
func rawEvents(t *testing.T, rdb *redis.Client, f *frontier.Redis, typ string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	k := f.Keys()
	keys := []string{k.Events}
	slaves, _ := rdb.ZRange(ctx, k.Slaves, 0, -1).Result()
	for _, s := range slaves {
		keys = append(keys, k.SlaveEvents(s))
	}
	known, _ := rdb.SMembers(ctx, k.Streams).Result()
	keys = append(keys, known...)
	var xs []redis.XMessage
	done := map[string]bool{}
	for _, key := range keys {
		if done[key] {
			continue
		}
		done[key] = true
		got, err := rdb.XRange(ctx, key, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, got...)
	}
	sort.SliceStable(xs, func(i, j int) bool { return streamIDLess(xs[i].ID, xs[j].ID) })
	var out []map[string]any
	for _, x := range xs {
		// one event (type, data) or several (t0, d0, t1, d1, ...)
		pairs := [][2]any{{x.Values["type"], x.Values["data"]}}
		if _, ok := x.Values["type"]; !ok {
			pairs = nil
			for i := 0; x.Values["t"+strconv.Itoa(i)] != nil; i++ {
				pairs = append(pairs, [2]any{x.Values["t"+strconv.Itoa(i)], x.Values["d"+strconv.Itoa(i)]})
			}
		}
		for _, p := range pairs {
			if p[0] != typ {
				continue
			}
			m := map[string]any{}
			if err := json.Unmarshal([]byte(p[1].(string)), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestContentDuplicate(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "dup", nil)
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0), tk("http://c.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 3)
	if err != nil || len(ls) != 3 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	byURL := map[string]frontier.Lease{}
	for _, l := range ls {
		byURL[l.URL] = l
	}
	const hash = 0x00c0ffee12345678
	cs := []frontier.Completion{
		{Lease: byURL["http://a.test/"], Outcome: frontier.Done, ContentHash: hash, Links: []frontier.Task{tk("http://a.test/x", 1)}},
		{Lease: byURL["http://b.test/"], Outcome: frontier.Done, ContentHash: hash, Links: []frontier.Task{tk("http://b.test/y", 1)}},
		{Lease: byURL["http://c.test/"], Outcome: frontier.Done, ContentHash: hash + 1, Links: []frontier.Task{tk("http://c.test/z", 1)}},
	}
	if _, err := f.Complete(ctx, "s1", cs); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stats(ctx)
	if st.Duplicates != 1 || st.Queued != 2 || st.Done != 3 {
		t.Fatalf("stats %+v, want duplicates 1 queued 2 done 3", st)
	}
	got := rawEvents(t, rdb, f, "duplicate")
	for _, e := range got {
		if at, _ := e["at"].(float64); at <= 0 {
			t.Errorf("duplicate at %v", e["at"])
		}
		delete(e, "at")
	}
	want := []map[string]any{{"crawl": f.Keys().Prefix[len("crawl:{") : len(f.Keys().Prefix)-2], "url": "http://b.test/",
		"first_url": "http://a.test/", "content_hash": "00c0ffee12345678", "slave": "s1"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("duplicate events (-want +got):\n%s", d)
	}
}

// TestJitterDistributions compares the next allowed fetch time a claim
// stores in Redis with the lease time: exactly the delay with none, within
// the distribution's bounds otherwise.
func TestJitterDistributions(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	const delay = 100 // ms
	for _, tc := range []struct {
		dist     string
		min, max int64 // extra ms over the delay (+1 ms rounding, see after)
	}{
		{frontier.JitterNone, 1, 1},
		{frontier.JitterUniform, 1, delay/2 + 1},
		{frontier.JitterExponential, 1, 5*delay/2 + 1},
	} {
		t.Run(tc.dist, func(t *testing.T) {
			f := newFrontier(t, rdb, "jit-"+tc.dist, func(o *frontier.Options) {
				o.Delay, o.Jitter, o.JitterDist = delay*time.Millisecond, 0.5, tc.dist
			})
			var seeds []frontier.Task
			for h := range 20 {
				seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", h), 0))
			}
			if _, err := f.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			ls, err := claimN(ctx, f, "s1", 20)
			if err != nil || len(ls) != 20 {
				t.Fatalf("claim: %v %d", err, len(ls))
			}
			distinct := map[int64]bool{}
			for _, l := range ls {
				nxt, err := rdb.HGet(ctx, f.Keys().HostNext, l.Host).Int64()
				if err != nil {
					t.Fatal(err)
				}
				extra := nxt - l.LeasedAt.UnixMilli() - delay
				if extra < tc.min || extra > tc.max {
					t.Errorf("%s: next time %d ms after the lease, want delay %d + [%d, %d]", l.Host, nxt-l.LeasedAt.UnixMilli(), delay, tc.min, tc.max)
				}
				distinct[extra] = true
			}
			if tc.dist != frontier.JitterNone && len(distinct) < 2 {
				t.Errorf("no jitter: %v", distinct)
			}
		})
	}
}

func TestRobotsTTL(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "robots", nil)
	at := time.UnixMilli(time.Now().UnixMilli())
	ok := frontier.RobotsRecord{FetchedAt: at, Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n")}
	if err := f.PutRobots(ctx, "a.test", ok); err != nil {
		t.Fatal(err)
	}
	if err := f.PutRobotsTTL(ctx, "b.test:8080", frontier.RobotsRecord{FetchedAt: at, Status: 503}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		max  time.Duration
	}{{"a.test", 24 * time.Hour}, {"b.test:8080", time.Minute}} {
		pttl, err := rdb.PTTL(ctx, f.Keys().RobotsHost(tc.host)).Result()
		if err != nil || pttl <= 0 || pttl > tc.max {
			t.Errorf("%s: PTTL %v (%v), want in (0, %v]", tc.host, pttl, err, tc.max)
		}
	}
	got, found, err := f.GetRobots(ctx, "a.test")
	if err != nil || !found || got.TTL <= 0 {
		t.Fatalf("get: %+v %v %v", got, found, err)
	}
	got.TTL = 0
	if d := cmp.Diff(ok, got); d != "" {
		t.Fatalf("record (-want +got):\n%s", d)
	}
	if _, found, err := f.GetRobots(ctx, "c.test"); found || err != nil {
		t.Fatalf("missing host: %v %v", found, err)
	}
}

func TestStrategyFixedPerCrawl(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "fixed", func(o *frontier.Options) { o.Strategy = frontier.StrategyAOPIC })
	crawl := strings.TrimSuffix(strings.TrimPrefix(f.Keys().Prefix, "crawl:{"), "}:")
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, Strategy: frontier.StrategyAOPIC}); err != nil {
		t.Fatalf("same strategy: %v", err)
	}
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl}); err == nil {
		t.Fatal("opened an aopic crawl as bfs")
	}
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, Strategy: "random"}); err == nil {
		t.Fatal("unknown strategy accepted")
	}
}

// TestAOPICCashConserved crawls a small graph with retries and failures and
// checks after every step that the crawl's cash (queued, leased, waiting
// for retry, lambda) stays the number of seeds, and that the pq structures
// agree with the queued count.
func TestAOPICCashConserved(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "cash", func(o *frontier.Options) {
		o.Strategy, o.HostConcurrency, o.MaxAttempts = frontier.StrategyAOPIC, 2, 2
	})
	keys := f.Keys()
	const pages = 40
	url := func(i int) string { return fmt.Sprintf("http://h%d.test/p%d", i%3, i) }
	if _, err := f.Seed(ctx, []frontier.Task{tk(url(0), 0), tk(url(1), 0)}); err != nil {
		t.Fatal(err)
	}
	check := func(step int) {
		t.Helper()
		total, queued := 0.0, int64(0)
		for h := range 3 {
			zs, err := rdb.ZRangeWithScores(ctx, keys.PQ(fmt.Sprintf("h%d.test", h)), 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range zs {
				total -= z.Score
				queued++
			}
		}
		lam, _ := rdb.HGet(ctx, keys.Meta, "aopic_lambda").Float64()
		total += lam
		slaves, _ := rdb.ZRange(ctx, keys.Slaves, 0, -1).Result()
		for _, sl := range slaves {
			lds, _ := rdb.HGetAll(ctx, keys.SlaveLeaseData(sl)).Result()
			for _, d := range lds {
				p, _ := strconv.ParseFloat(strings.Split(d, "\t")[4], 64)
				total -= p
			}
		}
		rs, _ := rdb.ZRange(ctx, keys.Retry, 0, -1).Result()
		for _, r := range rs {
			p, _ := strconv.ParseFloat(strings.Split(r, "\t")[1], 64)
			total -= p
		}
		if math.Abs(total-2) > 1e-9 {
			t.Fatalf("step %d: cash %v, want 2 (the seeds')", step, total)
		}
		st, _ := f.Stats(ctx)
		nd, _ := rdb.HLen(ctx, keys.PQData).Result()
		if st.Queued != queued || nd != queued {
			t.Fatalf("step %d: stats queued %d, pq members %d, pqdata %d", step, st.Queued, queued, nd)
		}
	}
	for step := 0; step < 200; step++ {
		ls, err := claimN(ctx, f, "s1", 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			if st, _ := f.Stats(ctx); st.Retry == 0 {
				break
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		check(step)
		var cs []frontier.Completion
		for _, l := range ls {
			var i int
			fmt.Sscanf(l.URL[strings.LastIndex(l.URL, "/p")+2:], "%d", &i)
			c := frontier.Completion{Lease: l, Outcome: frontier.Done}
			switch {
			case i%7 == 3:
				c.Outcome, c.RetryIn = frontier.Retry, time.Millisecond
			case i%11 == 5:
				c.Outcome = frontier.Fail
			}
			for _, j := range []int{2*i + 1, 2*i + 2, i / 2, (i * 5) % pages} {
				if j < pages {
					c.Links = append(c.Links, tk(url(j), l.Depth+1))
				}
			}
			cs = append(cs, c)
		}
		if _, err := f.Complete(ctx, "s1", cs); err != nil {
			t.Fatal(err)
		}
		check(step)
	}
	st, _ := f.Stats(ctx)
	if st.Queued != 0 || st.InFlight != 0 || st.Done+st.Failed != st.Seen || st.Failed == 0 || st.Retried == 0 {
		t.Fatalf("stats %+v, want every page done or failed, some after retries", st)
	}
}

// BenchmarkClaimComplete measures a fetch's frontier cost under each
// strategy: its share of a batched claim (32 tasks) and of a batched
// complete, each page adding 5 links of which 2 are new; bfs-bloom is bfs
// with Bloom-filter dedup. It also reports Redis's own time in the claim
// and complete scripts per page (INFO commandstats, server-wide: run it on
// an otherwise idle Redis).
//
//	go test -run '^$' -bench ClaimComplete ./shared/frontier/
func BenchmarkClaimComplete(b *testing.B) {
	for _, bc := range []struct{ name, strat, dedup string }{
		{frontier.StrategyBFS, frontier.StrategyBFS, ""},
		{frontier.StrategyDFS, frontier.StrategyDFS, ""},
		{frontier.StrategyPriority, frontier.StrategyPriority, ""},
		{frontier.StrategyAOPIC, frontier.StrategyAOPIC, ""},
		{"bfs-bloom", frontier.StrategyBFS, frontier.DedupBloom},
	} {
		strat := bc.strat
		b.Run(bc.name, func(b *testing.B) {
			rdb := testRedis(b)
			ctx := context.Background()
			f := newFrontier(b, rdb, "bench-"+bc.name, func(o *frontier.Options) {
				o.Strategy, o.HostConcurrency, o.ExpectedURLs = strat, 1000, int64(b.N)*3+100
				o.MaxPagesPerHost, o.MaxQueryVariants = 1<<40, 1000
				o.DedupMode = bc.dedup
			})
			var seeds []frontier.Task
			for h := range 32 {
				seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", h), 0))
			}
			if _, err := f.Seed(ctx, seeds); err != nil {
				b.Fatal(err)
			}
			next := 0
			usec0 := scriptUsec(b, rdb)
			var claimUsec, completeUsec int64
			b.ResetTimer()
			for done := 0; done < b.N; {
				ls, err := claimN(ctx, f, "s1", 32)
				if err != nil {
					b.Fatal(err)
				}
				if len(ls) == 0 {
					b.Fatal("frontier ran dry")
				}
				cs := make([]frontier.Completion, len(ls))
				for i, l := range ls {
					var links []frontier.Task
					for k := range 5 {
						if k < 2 {
							next++
						}
						links = append(links, tk(fmt.Sprintf("http://h%d.test/p%d", (next-k)%32, next-k), l.Depth+1))
					}
					cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, Links: links, ContentHash: contentHash(next)}
				}
				b.StopTimer()
				u := scriptUsec(b, rdb)
				claimUsec += u - usec0
				b.StartTimer()
				if _, err := f.Complete(ctx, "s1", cs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				usec0 = scriptUsec(b, rdb)
				completeUsec += usec0 - u
				b.StartTimer()
				done += len(ls)
			}
			b.StopTimer()
			b.ReportMetric(float64(claimUsec)/float64(b.N), "claim-redis-µs/page")
			b.ReportMetric(float64(completeUsec)/float64(b.N), "complete-redis-µs/page")
		})
	}
}

// scriptUsec is Redis's time in the library's functions (INFO
// commandstats fcall and fcall_ro usec, the commands they run included)
// since its start: server-wide, so other clients of the same Redis add to
// it.
func scriptUsec(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	stats, err := testutil.CommandStats(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return stats["fcall"].Usec + stats["fcall_ro"].Usec
}

// BenchmarkQueuedMemory measures the Redis memory of a queued URL under
// each strategy, beyond the URL's own length.
//
//	go test -run '^$' -bench QueuedMemory -benchtime 1x ./shared/frontier/
func BenchmarkQueuedMemory(b *testing.B) {
	const n = 100_000
	for _, strat := range []string{frontier.StrategyBFS, frontier.StrategyDFS, frontier.StrategyPriority, frontier.StrategyAOPIC} {
		b.Run(strat, func(b *testing.B) {
			for range b.N {
				rdb := testRedis(b)
				ctx := context.Background()
				f := newFrontier(b, rdb, "qmem-"+strat, func(o *frontier.Options) { o.Strategy, o.ExpectedURLs = strat, n })
				urlBytes := 0
				batch := make([]frontier.Task, 0, 1000)
				for i := range n {
					host := fmt.Sprintf("www.host%03d.example.com", i%100)
					u := fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", host, i, i*7)
					urlBytes += len(u)
					batch = append(batch, frontier.Task{URL: u, Host: host, ScopeHost: host, Depth: 3, Priority: 3, Score: float64(i % 10)})
					if len(batch) == cap(batch) || i == n-1 {
						if _, err := f.Seed(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				p := f.Keys().Prefix
				queued := sumMemory(b, rdb, p+"q:*") + sumMemory(b, rdb, p+"qp:*") + sumMemory(b, rdb, p+"pq:*") +
					sumMemory(b, rdb, p+"fresh")
				if n, err := rdb.MemoryUsage(ctx, f.Keys().PQData, 0).Result(); err == nil {
					queued += int(n)
				}
				b.ReportMetric(float64(queued-urlBytes)/float64(n), "queued-overhead-bytes/url")
				b.ReportMetric(float64(urlBytes)/float64(n), "url-len")
			}
		})
	}
}

// TestCompleteClaimRetryDue checks that a retry a completion adds is seen
// by the claim of the same call: one due at once (RetryIn 0) comes back
// to the host its ack freed, leased again with its attempt counted, in a
// crawl where the keys a call finds absent (FRESH.quiet: the retries
// among them) were all absent when the call began.
func TestCompleteClaimRetryDue(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "retrydue", nil)
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	acked, res, err := f.CompleteClaim(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Retry}}, 1, frontier.ClaimOptions{})
	if err != nil || len(acked) != 1 || !acked[0] {
		t.Fatalf("complete and claim: acked %v, %v", acked, err)
	}
	if len(res.Leases) != 1 || res.Leases[0].URL != "http://a.test/1" || res.Leases[0].Attempt != 1 {
		t.Fatalf("leases %+v; want http://a.test/1 again at attempt 1", res.Leases)
	}
}

// TestWorkSeq checks meta's work counter (CheckFinished compares it): a
// call that queues work adds 1, a call that queues none adds nothing, and
// a counter that is not a whole number fails the call (HINCRBY's error).
func TestWorkSeq(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "workseq", func(o *frontier.Options) { o.HostConcurrency = 4 })
	meta := f.Keys().Meta
	seq := func() int64 {
		t.Helper()
		n, err := rdb.HGet(ctx, meta, "workseq").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://a.test/2", 0)}); err != nil {
		t.Fatal(err)
	}
	w0 := seq()
	ls, err := claimN(ctx, f, "s1", 2)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	if got := seq(); got != w0 {
		t.Errorf("a claim moved workseq %d -> %d", w0, got)
	}
	// a new link: work added
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done,
		Links: []frontier.Task{tk("http://a.test/3", 1)}}}); err != nil {
		t.Fatal(err)
	}
	if got := seq(); got != w0+1 {
		t.Errorf("a completion with a new link: workseq %d -> %d, want +1", w0, got)
	}
	// a counter that is not a whole number: the call fails, as HINCRBY's
	if err := rdb.HSet(ctx, meta, "workseq", "x1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[1], Outcome: frontier.Done,
		Links: []frontier.Task{tk("http://a.test/4", 1)}}})
	if err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("completion with workseq x1: err = %v, want HINCRBY's not an integer", err)
	}
}

// BenchmarkScriptCost splits Redis's time in the claim and complete
// scripts (INFO commandstats, so server-side only: not the round trip)
// into a fixed part per call and a part per page, from calls of 1, 8 and
// 32 pages over 64 hosts (bfs, 4 in flight per host, delay 0; each
// completion with a content hash, a page event and 2 links, 1 new):
// a least-squares line of µs per call against pages per call. Redis runs
// on the same machine as the benchmark, so run it on an idle one.
//
//	go test -run '^$' -bench ScriptCost -benchtime 1x ./shared/frontier/
func BenchmarkScriptCost(b *testing.B) {
	rdb := testRedis(b)
	ctx := context.Background()
	f := newFrontier(b, rdb, "cost", func(o *frontier.Options) {
		o.HostConcurrency, o.ExpectedURLs = 4, 1<<20
	})
	sizes := []int{1, 8, 32}
	const calls = 60 // per size and round
	rounds := 5 * b.N
	var seeds []frontier.Task
	for i := range (1 + 8 + 32) * calls * rounds {
		seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/s%d", i%64, i), 0))
	}
	if _, err := f.Seed(ctx, seeds); err != nil {
		b.Fatal(err)
	}
	ev := []byte(`{"crawl":"cost","url":"http://h1.test/p1","status":200,"bytes":15000,"slave":"s1","depth":1}`)
	next := 0
	// per size: script µs and pages, claim and complete
	type acc struct{ claimUs, completeUs, pages float64 }
	got := map[int]*acc{}
	for _, n := range sizes {
		got[n] = &acc{}
	}
	b.ResetTimer()
	for range rounds {
		for _, n := range sizes {
			a := got[n]
			for range calls {
				u0 := scriptUsec(b, rdb)
				ls, err := claimN(ctx, f, "s1", n)
				if err != nil || len(ls) == 0 {
					b.Fatalf("claim: %d leases, %v", len(ls), err)
				}
				u1 := scriptUsec(b, rdb)
				cs := make([]frontier.Completion, len(ls))
				for i, l := range ls {
					next++
					cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, ContentHash: contentHash(next),
						Links:  []frontier.Task{tk(fmt.Sprintf("http://h%d.test/p%d", next%64, next), 1), tk(fmt.Sprintf("http://h%d.test/p%d", (next-1)%64, next-1), 1)},
						Events: []frontier.Event{{Type: "page", Data: ev}}}
				}
				if _, err := f.Complete(ctx, "s1", cs); err != nil {
					b.Fatal(err)
				}
				u2 := scriptUsec(b, rdb)
				a.claimUs += float64(u1 - u0)
				a.completeUs += float64(u2 - u1)
				a.pages += float64(len(ls))
			}
		}
	}
	b.StopTimer()
	// fit µs per call = fixed + perPage × pages per call
	fit := func(us func(*acc) float64) (fixed, perPage float64) {
		var sx, sy, sxx, sxy, k float64
		for _, n := range sizes {
			a := got[n]
			x, y := a.pages/float64(calls*rounds), us(a)/float64(calls*rounds)
			sx, sy, sxx, sxy, k = sx+x, sy+y, sxx+x*x, sxy+x*y, k+1
		}
		perPage = (k*sxy - sx*sy) / (k*sxx - sx*sx)
		return (sy - perPage*sx) / k, perPage
	}
	cf, cp := fit(func(a *acc) float64 { return a.claimUs })
	pf, pp := fit(func(a *acc) float64 { return a.completeUs })
	b.ReportMetric(cf, "claim-fixed-µs")
	b.ReportMetric(cp, "claim-µs/page")
	b.ReportMetric(pf, "complete-fixed-µs")
	b.ReportMetric(pp, "complete-µs/page")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkScriptSections splits Redis's time in the scripts of a crawl
// like the bench's (make bench: 20 hosts × 1,000 pages, 8 links per page,
// 4 in flight per host, delay 0, 64 leases in flight, acks sent with the
// claim in batches of 10, the link cache on, a ~500-byte page event and a
// content hash per page) into the sections marked --[[mark:name]] in the
// scripts' source, in µs per page, and reports the total script time per
// page (INFO commandstats), what making the call's arguments into Lua
// strings costs (ArgsOnlyUs) and what no section holds (the rest of the
// call's dispatch, the result's conversion). The markers run Redis TIME;
// what one adds is measured (MarkCostUs) and taken off every figure.
//
//	go test -run '^$' -bench ScriptSections -benchtime 1x ./shared/frontier/
func BenchmarkScriptSections(b *testing.B) {
	rdb := testRedis(b)
	ctx := context.Background()
	markUs, err := frontier.MarkCostUs(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	var total map[string]frontier.ProfileSection
	var plainUs, profUs, argsUs, pages float64
	b.ResetTimer()
	for range b.N {
		// the same crawl with the scripts as they are, then instrumented
		us, _, n, _ := sectionsCrawl(b, rdb, false, true)
		plainUs += us
		us, args, n2, prof := sectionsCrawl(b, rdb, true, true)
		profUs, argsUs, pages = profUs+us, argsUs+args, pages+float64(n+n2)/2
		if total == nil {
			total = map[string]frontier.ProfileSection{}
		}
		for k, v := range prof {
			s := total[k]
			s.Us += v.Us
			s.N += v.N
			total[k] = s
		}
	}
	b.StopTimer()
	type row struct {
		name    string
		perPage float64
	}
	var rows []row
	var sum float64
	for name, s := range total {
		us := (float64(s.Us) - float64(s.N)*markUs) / pages
		sum += us
		rows = append(rows, row{name, us})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].perPage > rows[j].perPage })
	rows = append(rows, row{"(arguments)", argsUs / pages})
	var markers float64
	for _, s := range total {
		markers += float64(s.N) * markUs / pages
	}
	rows = append(rows, row{"(no section)", (profUs-argsUs)/pages - markers - sum})
	var sb strings.Builder
	fmt.Fprintf(&sb, "%.1f µs per page in the scripts (%.1f instrumented, %.1f of it the markers' at %.2f µs each); by section, µs per page:",
		plainUs/pages, profUs/pages, markers, markUs)
	for i, r := range rows {
		if i%4 == 0 {
			sb.WriteString("\n ")
		}
		fmt.Fprintf(&sb, " %s %.2f", r.name, r.perPage)
	}
	b.Log(sb.String())
	b.ReportMetric(plainUs/pages, "script-µs/page")
	b.ReportMetric(sum, "sections-µs/page")
	b.ReportMetric(argsUs/pages, "args-µs/page")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCrawlCalls runs BenchmarkScriptSections' crawl alone, with no
// INFO between its calls: Redis's whole time in the functions over the
// crawl, and, run against a redis-server under valgrind --tool=callgrind,
// an instruction count that does not move with the machine's load.
//
//	go test -run '^$' -bench CrawlCalls -benchtime 1x ./shared/frontier/
func BenchmarkCrawlCalls(b *testing.B) {
	rdb := testRedis(b)
	var us float64
	var pages int
	for range b.N {
		u0 := scriptUsec(b, rdb)
		_, _, n, _ := sectionsCrawl(b, rdb, false, false)
		us += float64(scriptUsec(b, rdb) - u0)
		pages += n
	}
	b.ReportMetric(us/float64(pages), "function-µs/page")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCrawlCallsFourSlaves runs BenchmarkCrawlCalls' crawl as 4
// slaves of 16 workers would: each slave holds 16 leases and acks them in
// batches of 3 with its next claim, the slaves taking turns. Its calls
// carry a third of the pages of BenchmarkCrawlCalls' (batches of 10), so
// the functions' fixed cost per call weighs 3 times as much per page; run
// it against a redis-server under callgrind (see BenchmarkCrawlCalls).
//
//	go test -run '^$' -bench CrawlCallsFourSlaves -benchtime 1x ./shared/frontier/
func BenchmarkCrawlCallsFourSlaves(b *testing.B) {
	rdb := testRedis(b)
	var us float64
	var pages int
	for range b.N {
		u0 := scriptUsec(b, rdb)
		pages += slavesCrawl(b, rdb, 4, 16, 3, 1000)
		us += float64(scriptUsec(b, rdb) - u0)
	}
	b.ReportMetric(us/float64(pages), "function-µs/page")
	b.ReportMetric(0, "ns/op")
}

// slavesCrawl runs sectionsCrawl's crawl (20 hosts × perHost pages, 8
// links a page, the same events, hashes and options) as slaves that each hold
// inFlight leases and ack batch of them with each claim, taking turns,
// and returns the pages crawled.
func slavesCrawl(b *testing.B, rdb *redis.Client, slaves, inFlight, batch, perHost int) (pages int) {
	b.Helper()
	ctx := context.Background()
	const hosts, links = 20, 8
	url := func(h, n int) string { return fmt.Sprintf("http://h%02d.test/page/%d", h, n) }
	f := newFrontier(b, rdb, "slaves", func(o *frontier.Options) {
		o.HostConcurrency, o.ExpectedURLs, o.LinkCache = 4, int64(hosts*perHost), 1<<17
		o.MaxPagesPerHost, o.MaxQueryVariants, o.MaxDateVariants = 1_000_000, 1000, 100
	})
	var seeds []frontier.Task
	for h := range hosts {
		seeds = append(seeds, tk(url(h, 0), 0))
	}
	if _, err := f.Seed(ctx, seeds); err != nil {
		b.Fatal(err)
	}
	held := make([][]frontier.Lease, slaves)
	idle := 0 // slaves in a row that held nothing and got nothing
	for turn := 0; turn < 1_000_000 && idle < slaves; turn++ {
		s := turn % slaves
		id := fmt.Sprintf("s%d", s+1)
		n := min(batch, len(held[s]))
		cs := make([]frontier.Completion, n)
		for i, l := range held[s][:n] {
			var h, p int
			fmt.Sscanf(l.URL, "http://h%02d.test/page/%d", &h, &p)
			var ls []frontier.Task
			for k := range links {
				ls = append(ls, tk(url((h+k)%hosts, (p*7+k*131+1)%perHost), l.Depth+1))
			}
			ev := fmt.Sprintf(`{"crawl":"slaves","url":%q,"final_url":%q,"status":200,"content_type":"text/html; charset=utf-8","bytes":15003,"depth":%d,"fetched_at":1795403045380,"slave":"slaves-%s","content_hash":"1f092cb6a1c5abf3be4b41362a91211374eb9a0c","duration_ms":7,"attempt":0,"links":8,"charset":"utf-8","proxy":"direct","handler":"html","checksum":"1e1317a5bac7e063"}`, l.URL, l.URL, l.Depth, id)
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, ContentHash: contentHash(h*perHost + p),
				Links: ls, Events: []frontier.Event{{Type: "page", Data: []byte(ev)}}}
		}
		held[s] = held[s][n:]
		pages += n
		_, res, err := f.CompleteClaim(ctx, id, cs, inFlight-len(held[s]), frontier.ClaimOptions{})
		if err != nil {
			b.Fatal(err)
		}
		held[s] = append(held[s], res.Leases...)
		if n == 0 && len(res.Leases) == 0 && len(held[s]) == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	if pages != hosts*perHost {
		b.Fatalf("crawled %d pages, want %d", pages, hosts*perHost)
	}
	return pages
}

// sectionsCrawl runs BenchmarkScriptSections' crawl in a new crawl, its
// functions instrumented when profile, and returns the functions' µs (read
// around each call when measure), the arguments' µs (ArgsOnlyUs, with
// profile), the pages and the profile.
func sectionsCrawl(b *testing.B, rdb *redis.Client, profile, measure bool) (scriptUs, argsUs float64, pages int, prof map[string]frontier.ProfileSection) {
	b.Helper()
	ctx := context.Background()
	const hosts, perHost, links, inFlight, batch = 20, 1000, 8, 64, 10
	url := func(h, n int) string { return fmt.Sprintf("http://h%02d.test/page/%d", h, n) }
	f := newFrontier(b, rdb, "sections", func(o *frontier.Options) {
		o.HostConcurrency, o.ExpectedURLs, o.LinkCache = 4, hosts*perHost, 1<<17
		// the trap caps of config.yaml, as in make bench: every new link is counted
		o.MaxPagesPerHost, o.MaxQueryVariants, o.MaxDateVariants = 1_000_000, 1000, 100
	})
	if profile {
		f.ProfileScripts()
	}
	var seeds []frontier.Task
	for h := range hosts {
		seeds = append(seeds, tk(url(h, 0), 0))
	}
	if _, err := f.Seed(ctx, seeds); err != nil {
		b.Fatal(err)
	}
	var held []frontier.Lease
	for range 100_000 { // bounded: the crawl is 20,000 pages
		n := min(batch, len(held))
		if len(held) < inFlight/2 {
			n = len(held) // few left: ack them all
		}
		cs := make([]frontier.Completion, n)
		for i, l := range held[:n] {
			var h, p int
			fmt.Sscanf(l.URL, "http://h%02d.test/page/%d", &h, &p)
			var ls []frontier.Task
			for k := range links {
				ls = append(ls, tk(url((h+k)%hosts, (p*7+k*131+1)%perHost), l.Depth+1))
			}
			ev := fmt.Sprintf(`{"crawl":"sections","url":%q,"final_url":%q,"status":200,"content_type":"text/html; charset=utf-8","bytes":15003,"depth":%d,"fetched_at":1795403045380,"slave":"sections-s1","content_hash":"1f092cb6a1c5abf3be4b41362a91211374eb9a0c","duration_ms":7,"attempt":0,"links":8,"charset":"utf-8","proxy":"direct","handler":"html","checksum":"1e1317a5bac7e063"}`, l.URL, l.URL, l.Depth)
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, ContentHash: contentHash(h*perHost + p),
				Links: ls, Events: []frontier.Event{{Type: "page", Data: []byte(ev)}}}
		}
		held = held[n:]
		pages += n
		if n > 0 && profile {
			us, err := f.ArgsOnlyUs(ctx, "s1", cs, inFlight-len(held))
			if err != nil {
				b.Fatal(err)
			}
			argsUs += float64(us)
		}
		var u0 int64
		if measure {
			u0 = scriptUsec(b, rdb)
		}
		_, res, err := f.CompleteClaim(ctx, "s1", cs, inFlight-len(held), frontier.ClaimOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if measure {
			scriptUs += float64(scriptUsec(b, rdb) - u0)
		}
		held = append(held, res.Leases...)
		if len(held) == 0 {
			break
		}
	}
	if pages != hosts*perHost {
		b.Fatalf("crawled %d pages, want %d", pages, hosts*perHost)
	}
	if profile {
		var err error
		if prof, err = f.ScriptProfile(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return scriptUs, argsUs, pages, prof
}

// TestScriptProfile runs the instrumented scripts (BenchmarkScriptSections)
// through a claim, a complete and a complete-and-claim, and checks each
// names its sections: a marker that breaks a script or is never reached
// shows here.
func TestScriptProfile(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "profile", func(o *frontier.Options) { o.HostConcurrency = 2 })
	f.ProfileScripts()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://b.test/1", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 2)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim: %d leases, %v", len(ls), err)
	}
	done := func(l frontier.Lease) frontier.Completion {
		return frontier.Completion{Lease: l, Outcome: frontier.Done, ContentHash: uint64(len(l.URL)) + uint64(l.Token),
			Links: []frontier.Task{tk(l.URL+"0", 1)}, Events: []frontier.Event{{Type: "page", Data: []byte(`{}`)}}}
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{done(ls[0])}); err != nil {
		t.Fatal(err)
	}
	acked, res, err := f.CompleteClaim(ctx, "s1", []frontier.Completion{done(ls[1])}, 4, frontier.ClaimOptions{})
	if err != nil || len(acked) != 1 || !acked[0] || len(res.Leases) == 0 {
		t.Fatalf("complete and claim: acked %v, %d leases, %v", acked, len(res.Leases), err)
	}
	prof, err := f.ScriptProfile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, name := range []string{"prelude", "c_args", "c_lease_hmget", "c_lease_fields", "c_prefetch", "c_ack", "c_events",
		"c_content", "c_links", "c_lease_end", "k_retries", "k_control", "k_candidates", "k_pop", "k_lease_each", "k_host",
		"k_lease_write", "k_hint", "flush_hashes", "flush_ready", "flush_stats", "flush_events", "flush_meta"} {
		if prof[name].N == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("sections never timed: %v (profile %v)", missing, prof)
	}
	// 3 scripts ran: each runs its prelude once
	if got := prof["prelude"].N; got != 3 {
		t.Errorf("prelude timed %d times, want 3", got)
	}
}

// streamIDLess orders stream entry ids ms-seq as numbers.
func streamIDLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	ami, _ := strconv.ParseUint(am, 10, 64)
	bmi, _ := strconv.ParseUint(bm, 10, 64)
	if ami != bmi {
		return ami < bmi
	}
	asi, _ := strconv.ParseUint(as, 10, 64)
	bsi, _ := strconv.ParseUint(bs, 10, 64)
	return asi < bsi
}
