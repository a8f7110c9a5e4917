package masterd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// seedsConfig is a config for a test crawl of shards shards with its own
// crawl name and database.
func seedsConfig(t testing.TB, shards int) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("seeds")
	cfg.Crawl.Shards = shards
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.Admin.Listen = ""
	cfg.Master.Quiescence = 200 * time.Millisecond
	cfg.Dedup.ExpectedURLs = 10000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if rdb, err := redisconn.New(&cfg); err == nil {
			testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
			rdb.Close()
		}
	})
	return &cfg
}

// proc is what one master process opens: its own Redis client, frontier
// and MySQL pool.
type proc struct {
	rdb redis.UniversalClient
	f   *frontier.Redis
	st  *store.Store
}

// openProc opens a process's objects, closed when the test ends; hooks
// are added to its Redis client.
func openProc(t testing.TB, cfg *config.Config, hooks ...redis.Hook) proc {
	t.Helper()
	rdb, err := redisconn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f, err := frontier.NewRedis(context.Background(), rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	st, err := OpenStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return proc{rdb: rdb, f: f, st: st}
}

// seedURLs are n seeds, one per host, so that one claim round leases them
// all whatever the politeness.
func seedURLs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://h%03d.seeds.test/start", i)
	}
	sort.Strings(out)
	return out
}

// claimAll leases everything queued, as a slave would, completes it as
// fetched and returns the URLs, sorted: what a recrawl enqueued.
func claimAll(t *testing.T, f *frontier.Redis) []string {
	t.Helper()
	ctx := context.Background()
	var got []string
	for round := 0; ; round++ {
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == 0 && st.InFlight == 0 {
			break
		}
		if round > 1000 {
			t.Fatalf("%d still queued after %d claim rounds", st.Queued, round)
		}
		res, err := f.ClaimWaitOpts(ctx, "drain", 1000, frontier.ClaimOptions{})
		ls := res.Leases
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			time.Sleep(10 * time.Millisecond) // a shard's quiet after an empty claim
			continue
		}
		cs := make([]frontier.Completion, len(ls))
		for i, l := range ls {
			got = append(got, l.URL)
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done}
		}
		if _, err := f.Complete(ctx, "drain", cs); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(got)
	return got
}

// TestRecrawlSeedsAcrossMasters seeds a crawl through one master's
// objects, then recrawls it from a restarted master (new Redis client,
// frontier and MySQL pool: bin/master seed --recrawl's path) and from the
// schedulers of two other masters racing for the same slot (one claims it
// in MySQL and recrawls): each recrawl enqueues every recorded seed, on
// one frontier shard and on three. The seeds cost Redis nothing: the only
// record is MySQL's.
func TestRecrawlSeedsAcrossMasters(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) { testRecrawlSeedsAcrossMasters(t, shards) })
	}
}

func testRecrawlSeedsAcrossMasters(t *testing.T, shards int) {
	ctx := context.Background()
	cfg := seedsConfig(t, shards)
	urls := seedURLs(40)

	// master 1 seeds (the admin API's seed action runs seedWith on the
	// master's own objects), then goes away
	{
		m1 := openProc(t, cfg)
		res, err := seedWith(ctx, cfg, m1.f, m1.st, nil, urls)
		if err != nil || res.Added != len(urls) {
			t.Fatalf("seed = %+v, %v; want %d added", res, err, len(urls))
		}
		m1.st.Close()
	}
	w := openProc(t, cfg) // a slave's view of the frontier
	if d := cmp.Diff(urls, claimAll(t, w.f)); d != "" {
		t.Fatalf("first crawl's URLs (-want +got):\n%s", d)
	}

	// a restarted master recrawls: new objects, bin/master seed --recrawl
	n, err := Recrawl(ctx, cfg)
	if err != nil || n != len(urls) {
		t.Fatalf("recrawl after a restart enqueued %d, %v; want %d", n, err, len(urls))
	}
	if d := cmp.Diff(urls, claimAll(t, w.f)); d != "" {
		t.Errorf("recrawl after a restart (-want +got):\n%s", d)
	}

	// two other masters' schedulers wake for the same slot: one claims it
	// and recrawls with its own objects
	clk := &fakeClock{t: at(1, 10, 5)}
	list := fixed(sched(t, "", "@hourly"))
	var fired sync.Map
	master := func(id string) *scheduler {
		p := openProc(t, cfg)
		return newScheduler(p.st, cfg.Crawl.Name, id, clk, reseederFunc(func(ctx context.Context, name string) (int, error) {
			fired.Store(id, true)
			return recrawl(ctx, cfg, p.f, p.st, nil, name)
		}), list)
	}
	ma, mb := master("ma"), master("mb")
	ma.tick(ctx) // first sight: nothing due
	mb.tick(ctx)
	clk.Set(at(1, 11, 0))
	var wg sync.WaitGroup
	wg.Go(func() { ma.tick(ctx) })
	wg.Go(func() { mb.tick(ctx) })
	wg.Wait()
	if d := cmp.Diff(urls, claimAll(t, w.f)); d != "" {
		t.Errorf("scheduled recrawl on a second master (-want +got):\n%s", d)
	}
	rs := runs(t, w.st, cfg.Crawl.Name)
	if len(rs) != 1 || rs[0].Seeds.Int64 != int64(len(urls)) {
		t.Errorf("schedule runs %+v; want one with %d seeds", rs, len(urls))
	}
	nfired := 0
	fired.Range(func(any, any) bool { nfired++; return true })
	if nfired != 1 {
		t.Errorf("%d masters recrawled the slot, want 1", nfired)
	}
}

// TestSeedRecordedFirst checks the seed path's order and what a failure
// leaves: with MySQL down nothing is enqueued; with Redis down after the
// seeds were recorded, rerunning the same seed enqueues them; a third run
// changes nothing, and every seed is recorded once.
func TestSeedRecordedFirst(t *testing.T) {
	ctx := context.Background()
	cfg := seedsConfig(t, 1)
	urls := seedURLs(30)
	p := openProc(t, cfg)

	downDB, err := OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	downDB.Close() // MySQL gone
	if _, err := seedWith(ctx, cfg, p.f, downDB, nil, urls); err == nil || !strings.Contains(err.Error(), "nothing enqueued") {
		t.Fatalf("seed with MySQL down: %v; want an error saying nothing was enqueued", err)
	}
	if st, err := p.f.Stats(ctx); err != nil || st.Queued != 0 || st.Seen != 0 {
		t.Fatalf("after the failed seed: %d queued, %d seen (%v); want nothing", st.Queued, st.Seen, err)
	}

	down := openProc(t, cfg, failScripts{})
	if _, err := seedWith(ctx, cfg, down.f, p.st, nil, urls); err == nil || !strings.Contains(err.Error(), "recorded") {
		t.Fatalf("seed with Redis down: %v; want an error saying the seeds are recorded", err)
	}
	if got := recordedSeeds(t, p.st, cfg.Crawl.Name); !cmp.Equal(urls, got) {
		t.Fatalf("recorded after the Redis failure: %d of %d", len(got), len(urls))
	}

	for i, want := range []SeedResult{{Added: len(urls)}, {Seen: len(urls)}} {
		res, err := seedWith(ctx, cfg, p.f, p.st, nil, urls)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("rerun %d (-want +got):\n%s", i+1, d)
		}
	}
	if d := cmp.Diff(urls, recordedSeeds(t, p.st, cfg.Crawl.Name)); d != "" {
		t.Errorf("recorded seeds (-want +got):\n%s", d)
	}
}

// recordedSeeds returns a crawl's recorded seeds, sorted.
func recordedSeeds(t *testing.T, st *store.Store, crawl string) []string {
	t.Helper()
	var out []string
	var after []byte
	for {
		urls, next, err := st.SeedURLs(context.Background(), crawl, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		out, after = append(out, urls...), next
	}
	sort.Strings(out)
	return out
}

// failScripts fails every script call (FCALL): a Redis that goes down
// after the seeds are recorded in MySQL, before they are enqueued.
type failScripts struct{}

func (failScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (failScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "fcall" || n == "fcall_ro" {
			err := errors.New("redis down")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (failScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
