// Package soak is the soak test's machinery: crawls of the test site, one
// after another, each by a master, three direct slaves, a slave of the
// work API (processes of bin/master and bin/slave) and a direct slave in
// this process whose clock is minutes off, under faults drawn at random
// from a seeded generator: slaves killed, frozen and partitioned, the
// master killed, MySQL cut and refusing writes, Redis killed (with its
// AOF) and out of memory, a Redis Cluster master failed over, the API
// slave killed and restarted, the clock slave's clock stepped. A crawl
// alternates between one Redis server and a Redis Cluster of 3 masters
// and 3 replicas (a crawl of 6 shards). Each crawl's end checks the
// invariants (Round.check); the run's figures are summed into one line
// (Figures.Line).
package soak

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// Options say how long a soak runs and with which faults.
type Options struct {
	// Seed seeds every random choice: the sites, the faults, their
	// targets, times and lengths. The processes' own timing is not
	// seeded, so two runs of one seed meet the same faults in the same
	// order, not at the same pages.
	Seed uint64
	// Duration is how long the soak crawls: crawls start while the next
	// one is expected to end within it, and there is at least one crawl
	// on one Redis server and one on a Redis Cluster.
	Duration time.Duration
	// Log receives a line per crawl and per fault; nil: none.
	Log io.Writer
}

// Topology is what a crawl's Redis is.
type Topology int

const (
	// Single is one redis-server with an AOF (appendfsync everysec).
	Single Topology = iota
	// Cluster is a Redis Cluster of 3 masters, each with a replica.
	Cluster
)

func (t Topology) String() string {
	if t == Cluster {
		return "cluster"
	}
	return "single"
}

// Soak is one soak run: the services its crawls share, and their figures.
type Soak struct {
	t     testing.TB
	opt   Options
	log   *slog.Logger
	bins  binaries
	redis *testutil.Server // the Single topology's Redis
	rc    *testutil.Cluster
	mysql mysqlUser
	mem   *memory

	mu  sync.Mutex
	fig Figures
}

// Run runs the soak: crawls until opt.Duration has passed, each one's
// invariants checked with t. It returns the figures of every crawl.
func Run(t testing.TB, opt Options) Figures {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found in PATH: the soak runs its own (apt-get install redis-server)")
	}
	s := &Soak{t: t, opt: opt, log: slog.New(slog.DiscardHandler)}
	if opt.Log != nil {
		s.log = slog.New(slog.NewTextHandler(opt.Log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s.fig = Figures{Seed: opt.Seed, Faults: map[string]int{}, PeakRSS: map[string]int64{}}
	start := time.Now()
	var err error
	if s.bins, err = build(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	s.mem = startMemory(t)
	s.redis = startRedis(t)
	s.mem.watch("redis", s.redis.Pid)
	s.mysql = newMySQLUser(t)
	var took []time.Duration
	for n := 0; ; n++ {
		topo := Single
		if n%2 == 1 {
			topo = Cluster
		}
		elapsed := time.Since(start)
		if n >= 2 && elapsed+mean(took) > opt.Duration {
			break
		}
		roundStart := time.Now()
		s.round(n, topo)
		took = append(took, time.Since(roundStart))
		if t.Failed() {
			break // the first crawl that breaks an invariant ends the soak: its logs say why
		}
	}
	s.fig.Took = time.Since(start)
	s.mem.stop()
	s.fig.PeakRSS = s.mem.peaks()
	s.mem.check(t)
	return s.fig
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// cluster starts the Redis Cluster at its first use.
func (s *Soak) cluster() *testutil.Cluster {
	if s.rc == nil {
		s.rc = testutil.StartCluster(s.t, 3, 1, testutil.WithNodeTimeout(time.Second))
		for _, nd := range s.rc.Nodes {
			s.mem.watch("cluster_node", nd.Server.Pid)
		}
	}
	return s.rc
}

// rng is the random source of crawl n: its own stream of the seed.
func (s *Soak) rng(n int) *rand.Rand {
	return rand.New(rand.NewPCG(s.opt.Seed, uint64(n)+1))
}

// Figures are what a soak did and saw.
type Figures struct {
	Seed    uint64
	Took    time.Duration
	Rounds  map[Topology]int
	Faults  map[string]int // by kind (the fault* constants)
	Pages   int            // pages of the sites crawled (robots.txt not counted)
	Fetches int            // requests the sites received for them
	// Refetches are fetches beyond a URL's expected ones; LostLeases the
	// leases taken back (lost_tasks rows); AfterLoss the re-fetches
	// excused by a Redis data loss (a URL fetched in its window).
	Refetches, LostLeases, AfterLoss int
	// Gaps are two requests to one host closer than politeness.delay;
	// GapsAfterLoss those right after Redis lost data, GapsAfterFreeze
	// those of a request a frozen slave sent as it woke (both excused).
	Gaps, GapsAfterLoss, GapsAfterFreeze int
	PeakRSS                              map[string]int64 // bytes, by role
}

func (f *Figures) add(kind string) {
	if f.Faults == nil {
		f.Faults = map[string]int{}
	}
	f.Faults[kind]++
}

// Line is the figures in one line.
func (f Figures) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed=%d took=%v crawls=%d (single %d, cluster %d) pages=%d fetches=%d refetches=%d lost_leases=%d refetches_after_data_loss=%d politeness_gaps=%d (after data loss %d, as a frozen slave woke %d) faults:",
		f.Seed, f.Took.Round(time.Second), f.Rounds[Single]+f.Rounds[Cluster], f.Rounds[Single], f.Rounds[Cluster],
		f.Pages, f.Fetches, f.Refetches, f.LostLeases, f.AfterLoss, f.Gaps+f.GapsAfterLoss+f.GapsAfterFreeze,
		f.GapsAfterLoss, f.GapsAfterFreeze)
	for _, k := range allFaults {
		fmt.Fprintf(&b, " %s=%d", k, f.Faults[k])
	}
	b.WriteString(" peak_rss_mib:")
	roles := make([]string, 0, len(f.PeakRSS))
	for r := range f.PeakRSS {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		fmt.Fprintf(&b, " %s=%.0f", r, float64(f.PeakRSS[r])/(1<<20))
	}
	return b.String()
}

// binaries are bin/master and bin/slave, built for the soak.
type binaries struct{ master, slave string }

func build(dir string) (binaries, error) {
	b := binaries{master: filepath.Join(dir, "master"), slave: filepath.Join(dir, "slave")}
	for pkg, out := range map[string]string{"master": b.master, "slave": b.slave} {
		cmd := exec.Command("go", "build", "-o", out, "github.com/redcrawl/redcrawl/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", pkg, err, o)
		}
	}
	return b, nil
}

// startRedis starts the Single topology's Redis: an AOF written every
// second, noeviction (what docs/deploy.md's snippet sets), so that out of
// memory it refuses writes.
func startRedis(t testing.TB) *testutil.Server {
	t.Helper()
	return testutil.StartRedis(t, nil, "--appendonly", "yes", "--appendfsync", "everysec",
		"--maxmemory-policy", "noeviction")
}

// ctxFor is a context for one step of a soak: bounded, never left
// hanging on a service a fault holds.
func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
