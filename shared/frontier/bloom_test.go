package frontier_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestBloomSize(t *testing.T) {
	type size struct {
		M uint64
		K int
	}
	for _, tc := range []struct {
		n    int64
		p    float64
		want size
	}{
		{1_000_000, 1e-6, size{28_755_176, 20}}, // 3.59 bytes per URL
		{100_000, 1e-6, size{2_875_520, 20}},
		{200_000, 1e-3, size{2_875_520, 10}},
		{10_000_000, 1e-6, size{287_551_752, 20}},
		{0, 1e-2, size{9_592, 7}}, // fewer than 1000 URLs count as 1000; whole bytes
	} {
		m, k, err := frontier.NewBloomSize(tc.n, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, size{m, k}); d != "" {
			t.Errorf("n=%d p=%v (-want +got):\n%s", tc.n, tc.p, d)
		}
	}
	if _, _, err := frontier.NewBloomSize(1e15, 1e-12); err == nil {
		t.Error("a filter over 2^42 bits: no error")
	}
}

func TestOptionsFromConfigDedup(t *testing.T) {
	c := &config.Config{}
	c.Crawl.Name = "x"
	c.Dedup = config.Dedup{ExpectedURLs: 5000, Mode: "bloom", FalsePositiveRate: 1e-4}
	o := frontier.OptionsFromConfig(c)
	type dd struct {
		Mode string
		P    float64
		N    int64
	}
	if d := cmp.Diff(dd{"bloom", 1e-4, 5000}, dd{o.DedupMode, o.FalsePositiveRate, o.ExpectedURLs}); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// TestDedupModeFixed: the mode is fixed when the crawl is created, like the
// strategy; a crawl made by an older key layout is refused, whatever the
// mode, saying the way out, and left as it was.
func TestDedupModeFixed(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		create, open string // "older": a crawl whose meta has no layout field
		wantErr      bool
	}{
		{"exact then default", frontier.DedupExact, "", false},
		{"default then exact", "", frontier.DedupExact, false},
		{"bloom then bloom", frontier.DedupBloom, frontier.DedupBloom, false},
		{"exact then bloom", frontier.DedupExact, frontier.DedupBloom, true},
		{"bloom then exact", frontier.DedupBloom, frontier.DedupExact, true},
		{"bloom then default", frontier.DedupBloom, "", true},
		{"older then exact", "older", frontier.DedupExact, true},
		{"older then bloom", "older", frontier.DedupBloom, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crawl := uniqueCrawl(t, rdb, "mode")
			o := frontier.Options{Crawl: crawl, ExpectedURLs: 10000, DedupMode: tc.create}
			if tc.create == "older" {
				if err := rdb.HSet(ctx, frontier.NewKeys(crawl).Meta, "seen_bits", 8, "strategy", "bfs").Err(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := frontier.NewRedis(ctx, rdb, o); err != nil {
				t.Fatal(err)
			}
			o.DedupMode = tc.open
			o.FalsePositiveRate = 1e-3 // another rate: the crawl keeps its own size
			f, err := frontier.NewRedis(ctx, rdb, o)
			if (err != nil) != tc.wantErr {
				t.Fatalf("open: err %v, want error %v", err, tc.wantErr)
			}
			if tc.create == "older" {
				if !strings.Contains(err.Error(), "master drop --crawl "+crawl) {
					t.Errorf("open an older crawl: %v; want the way out named", err)
				}
				if n, err := rdb.HLen(ctx, frontier.NewKeys(crawl).Meta).Result(); err != nil || n != 2 {
					t.Errorf("older crawl's meta has %d fields (%v) after the open, want its 2", n, err)
				}
			}
			if err == nil && tc.open == frontier.DedupBloom {
				if m, k, _ := f.BloomSize(); m != 287_552 || k != 20 {
					t.Fatalf("bloom m=%d k=%d, want the creator's 287552 and 20", m, k)
				}
			}
		})
	}
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: "x", DedupMode: "cuckoo"}); err == nil {
		t.Error("unknown mode: no error")
	}
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: "x", DedupMode: "bloom", FalsePositiveRate: 0.5}); err == nil {
		t.Error("rate 0.5: no error")
	}
}

// TestBloomLayout checks that the script sets exactly the bits Go computes,
// in the documented segment layout, and that every segment was created at
// its full length.
func TestBloomLayout(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	// 1M URLs at 1e-3: 14.4 Mbit, 14 segments, the last one partial
	f := newFrontier(t, rdb, "layout", func(o *frontier.Options) {
		o.DedupMode, o.ExpectedURLs, o.FalsePositiveRate = frontier.DedupBloom, 1_000_000, 1e-3
	})
	m, k, seg := f.BloomSize()
	if seg != frontier.BloomSegBits {
		t.Fatalf("segment bits %d, want %d", seg, frontier.BloomSegBits)
	}
	segs := (m + seg - 1) / seg
	var lens, wantLens []int64
	for s := range segs {
		n, err := rdb.StrLen(ctx, f.Keys().Bloom(s)).Result()
		if err != nil {
			t.Fatal(err)
		}
		lens = append(lens, n)
		wantLens = append(wantLens, int64((min(m-s*seg, seg)+7)/8))
	}
	if d := cmp.Diff(wantLens, lens); d != "" {
		t.Fatalf("segment lengths (-want +got):\n%s", d)
	}
	const u = "http://layout.test/some/page"
	pos := f.BloomPositions(u)
	if len(pos) != k {
		t.Fatalf("%d positions, want k=%d", len(pos), k)
	}
	if n, err := f.Seed(ctx, []frontier.Task{tk(u, 0)}); err != nil || n != 1 {
		t.Fatalf("seed: %d %v", n, err)
	}
	distinct := map[uint64]bool{}
	for _, p := range pos {
		distinct[p] = true
		bit, err := rdb.GetBit(ctx, f.Keys().Bloom(p/seg), int64(p%seg)).Result()
		if err != nil || bit != 1 {
			t.Fatalf("bit %d (segment %d offset %d) = %d %v, want 1", p, p/seg, p%seg, bit, err)
		}
	}
	var set int64
	for s := range segs {
		n, err := rdb.BitCount(ctx, f.Keys().Bloom(s), nil).Result()
		if err != nil {
			t.Fatal(err)
		}
		set += n
	}
	if set != int64(len(distinct)) {
		t.Fatalf("%d bits set in the filter, want the URL's %d", set, len(distinct))
	}
}

// TestDedupModesComplete runs the seed and link paths in both modes: the
// same URLs seeded twice, links repeating seeds, each other and earlier
// links; only new URLs are queued and counted in Stats.Seen.
func TestDedupModesComplete(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	type result struct {
		Seeded, Reseeded int
		Seen             int64
		Claimed          []string
	}
	for _, mode := range []string{frontier.DedupExact, frontier.DedupBloom} {
		t.Run(mode, func(t *testing.T) {
			f := newFrontier(t, rdb, "modes-"+mode, func(o *frontier.Options) { o.DedupMode = mode })
			var got result
			var err error
			seeds := []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0), tk("http://a.test/", 0)}
			if got.Seeded, err = f.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			if got.Reseeded, err = f.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			links := []frontier.Task{tk("http://a.test/", 1), tk("http://a.test/x", 1), tk("http://b.test/", 1),
				tk("http://a.test/x", 1), tk("http://b.test/y", 1)}
			for range 3 {
				ls, err := claimN(ctx, f, "s1", 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(ls) == 0 {
					break
				}
				cs := make([]frontier.Completion, len(ls))
				for i, l := range ls {
					got.Claimed = append(got.Claimed, l.URL)
					cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, Links: links}
				}
				if _, err := f.Complete(ctx, "s1", cs); err != nil {
					t.Fatal(err)
				}
			}
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got.Seen = st.Seen
			want := result{Seeded: 2, Reseeded: 0, Seen: 4,
				Claimed: []string{"http://a.test/", "http://b.test/", "http://a.test/x", "http://b.test/y"}}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestBloomFalsePositives fills a bloom crawl with the URLs it was sized
// for, then asks about as many other URLs: each one taken for seen is a
// false positive (the sets are disjoint). Nothing inserted may be missed.
// The URLs are fixed, so the counts are the same on every run.
func TestBloomFalsePositives(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		n     int
		p     float64
		maxFP int
	}{
		{200_000, 1e-3, 3 * 200}, // below 3p: expected 200
		{100_000, 1e-6, 2},       // expected 0.1
	} {
		t.Run(fmt.Sprint(tc.p), func(t *testing.T) {
			f := newFrontier(t, rdb, "fp", func(o *frontier.Options) {
				o.DedupMode, o.ExpectedURLs, o.FalsePositiveRate = frontier.DedupBloom, int64(tc.n), tc.p
			})
			in := fpURLs("in", tc.n)
			added := seedAll(t, f, in)
			// the few inserted URLs that were themselves false positives
			// were not added (so Stats.Seen may be a little short of n)
			if added > tc.n || tc.n-added > tc.maxFP {
				t.Fatalf("seeded %d of %d distinct URLs", added, tc.n)
			}
			has, err := f.MaybeSeen(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if missed := count(has, false); missed != 0 {
				t.Fatalf("%d inserted URLs not seen", missed)
			}
			has, err = f.MaybeSeen(ctx, fpURLs("out", tc.n))
			if err != nil {
				t.Fatal(err)
			}
			fp := count(has, true)
			t.Logf("p=%v n=%d: %d false positives in %d fresh URLs (rate %.2g, expected %.3g); %d of %d seeds added",
				tc.p, tc.n, fp, tc.n, float64(fp)/float64(tc.n), tc.p*float64(tc.n), added, tc.n)
			if fp > tc.maxFP {
				t.Fatalf("%d false positives, want at most %d", fp, tc.maxFP)
			}
		})
	}
}

func fpURLs(set string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("https://www.host%03d.example.com/%s/articles/%d/title-%d.html", i%100, set, i, i*7)
	}
	return out
}

func seedAll(t testing.TB, f *frontier.Redis, urls []string) int {
	t.Helper()
	total := 0
	batch := make([]frontier.Task, 0, 1000)
	for i, u := range urls {
		host := fmt.Sprintf("www.host%03d.example.com", i%100)
		batch = append(batch, frontier.Task{URL: u, Host: host, ScopeHost: host, Depth: 1, Priority: 1})
		if len(batch) == cap(batch) || i == len(urls)-1 {
			n, err := f.Seed(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			batch = batch[:0]
		}
	}
	return total
}

func count(bs []bool, v bool) int {
	n := 0
	for _, b := range bs {
		if b == v {
			n++
		}
	}
	return n
}
