package dnscache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEvictionSkipsPinned(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type spec struct {
		host   string
		ttl    time.Duration // remaining
		pinned bool
	}
	tests := []struct {
		name        string
		entries     []spec
		wantEvicted []string // nil: none, the cache grows
	}{
		{"unpinned lowest weight", []spec{{"a", time.Minute, false}, {"b", 10 * time.Second, false}, {"c", time.Minute, true}}, []string{"b"}},
		{"pinned expired entry stays", []spec{{"a", -time.Second, true}, {"b", 10 * time.Second, false}, {"c", time.Minute, false}}, []string{"b"}},
		{"every entry pinned: the cache grows", []spec{{"a", time.Minute, true}, {"b", time.Minute, true}, {"c", time.Minute, true}}, nil},
		{"over the bound, back to it", []spec{{"a", time.Minute, true}, {"b", time.Minute, true}, {"c", 10 * time.Second, false}, {"d", 20 * time.Second, false}}, []string{"c", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(3)
			c.pins = map[string]int{}
			for _, s := range tt.entries {
				if s.pinned {
					c.pins[s.host] = 1
				}
				// filled past the bound: stored directly, as pinned entries
				// of a full cache would have been
				e := &entry{host: s.host, took: time.Millisecond, expires: now.Add(s.ttl)}
				e.lastAccess.Store(now.UnixNano())
				e.idx = len(c.list)
				c.list = append(c.list, e)
				c.m[s.host] = e
			}
			n := c.put(&entry{host: "new", took: time.Millisecond, expires: now.Add(time.Hour)}, now)
			var evicted []string
			for _, s := range tt.entries {
				if c.m[s.host] == nil {
					evicted = append(evicted, s.host)
				}
			}
			if d := cmp.Diff(tt.wantEvicted, evicted); d != "" {
				t.Fatalf("evicted (-want +got):\n%s", d)
			}
			if n != len(evicted) || c.m["new"] == nil {
				t.Fatalf("put reported %d evictions, stored new: %v", n, c.m["new"] != nil)
			}
		})
	}
}

func TestEvictionSampledFindsTheUnpinned(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		size     int
		unpinned []int // indexes of the unpinned entries
	}{
		{"one unpinned of 1000 (found by the scan)", 1000, []int{617}},
		{"half unpinned (found by sampling)", 200, func() []int {
			var out []int
			for i := 0; i < 200; i += 2 {
				out = append(out, i)
			}
			return out
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(tt.size)
			c.pins = map[string]int{}
			free := map[string]bool{}
			for _, i := range tt.unpinned {
				free[fmt.Sprintf("h%d", i)] = true
			}
			for i := range tt.size {
				h := fmt.Sprintf("h%d", i)
				if !free[h] {
					c.pins[h] = 1
				}
				e := &entry{host: h, expires: now.Add(time.Minute)}
				e.lastAccess.Store(now.UnixNano())
				c.put(e, now)
			}
			for i := range len(tt.unpinned) {
				e := &entry{host: fmt.Sprintf("new%d", i), expires: now.Add(time.Minute)}
				if n := c.put(e, now); n != 1 {
					t.Fatalf("put %d evicted %d, want 1", i, n)
				}
			}
			for h := range c.pins {
				if c.m[h] == nil {
					t.Fatalf("pinned %s evicted", h)
				}
			}
			if c.len() != tt.size {
				t.Fatalf("len %d, want %d", c.len(), tt.size)
			}
		})
	}
}

func TestPinThroughResolver(t *testing.T) {
	zone := map[string]rec{}
	for _, h := range []string{"a.test", "b.test", "c.test", "d.test"} {
		zone[h] = rec{a: []string{"127.0.0.1"}, ttl: 60}
	}
	srv := newServer(t, zone)
	clk := newClock()
	r := newResolver(t, Options{Server: srv.addr, Now: clk.Now, MaxEntries: 2})
	ctx := context.Background()
	// each step: pin / unpin / look up one name, then the resolutions of
	// a.test so far and the names pinned
	steps := []struct {
		op, host      string
		wantA, pinned int
	}{
		{"pin", "A.test.", 0, 1}, // another spelling of a.test
		{"pin", "a.test", 0, 1},  // twice
		{"lookup", "a.test", 1, 1},
		{"lookup", "b.test", 1, 1},
		{"lookup", "c.test", 1, 1}, // evicts b, not the idler but pinned a
		{"lookup", "d.test", 1, 1},
		{"lookup", "a.test", 1, 1},
		{"unpin", "a.test", 1, 1}, // still pinned once
		{"lookup", "b.test", 1, 1},
		{"unpin", "a.test", 1, 0},
		{"unpin", "a.test", 1, 0},  // not pinned: nothing
		{"lookup", "c.test", 1, 0}, // evicts a, the idlest, unpinned now
		{"lookup", "a.test", 2, 0},
	}
	for i, st := range steps {
		clk.Advance(10 * time.Second)
		switch st.op {
		case "pin":
			r.Pin(st.host)
		case "unpin":
			r.Unpin(st.host)
		default:
			if _, err := r.LookupIP(ctx, st.host); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if got := srv.queries("a.test"); got != st.wantA {
			t.Fatalf("step %d (%s %s): a.test resolved %d times, want %d", i, st.op, st.host, got, st.wantA)
		}
		if got := r.Stats().Pinned; got != st.pinned {
			t.Fatalf("step %d (%s %s): %d names pinned, want %d", i, st.op, st.host, got, st.pinned)
		}
	}
}

func TestPrefetchIfRoom(t *testing.T) {
	zone := map[string]rec{}
	var hosts []string
	for i := range 8 {
		h := fmt.Sprintf("p%d.test", i)
		zone[h] = rec{a: []string{"127.0.0.1"}, ttl: 300}
		hosts = append(hosts, h)
	}
	tests := []struct {
		name        string
		cached      int      // hosts[:cached] looked up first
		prefetch    []string // then PrefetchIfRoom of these
		wantQueued  int
		wantSkipped uint64
	}{
		{"room for all", 0, hosts[:3], 3, 0},
		{"room for some", 3, hosts[3:8], 1, 4},
		{"full", 4, hosts[4:8], 0, 4},
		{"cached names are no work", 4, hosts[:4], 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, zone)
			r := newResolver(t, Options{Server: srv.addr, Now: newClock().Now, MaxEntries: 4})
			for _, h := range hosts[:tt.cached] {
				if _, err := r.LookupIP(context.Background(), h); err != nil {
					t.Fatal(err)
				}
			}
			r.PrefetchIfRoom(tt.prefetch)
			want := uint64(tt.cached + tt.wantQueued)
			waitFor(t, "the prefetches", func() bool { return r.Stats().Queries == want && r.Stats().Positive == int(want) })
			st := r.Stats()
			if st.Skipped != tt.wantSkipped || st.Evictions != 0 || st.Prefetched != uint64(tt.wantQueued) {
				t.Fatalf("stats %+v, want %d skipped, %d prefetched, none evicted", st, tt.wantSkipped, tt.wantQueued)
			}
		})
	}
}

// TestOneResolutionPerName checks the singleflight: however lookups and
// prefetches of a name interleave while it resolves, one resolution is
// sent.
func TestOneResolutionPerName(t *testing.T) {
	tests := []struct {
		name                 string
		prefetchFirst        bool
		lookups, prefetches  int
		wantMisses, wantJoin uint64 // Stats.Misses, Stats.Coalesced
	}{
		{"lookups only", false, 20, 0, 20, 19},
		{"a prefetch, then lookups", true, 20, 0, 20, 20},
		{"lookups and prefetches", false, 10, 10, 10, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			srv := newServer(t, map[string]rec{"a.test": {a: []string{"127.0.0.1"}, ttl: 60, hook: func() { <-gate }}})
			open := sync.OnceFunc(func() { close(gate) })
			t.Cleanup(open)
			r := newResolver(t, Options{Server: srv.addr, Now: newClock().Now})
			if tt.prefetchFirst {
				r.Prefetch([]string{"a.test"})
				waitFor(t, "the prefetch to start", func() bool { return r.Stats().Queries == 1 })
			}
			var wg sync.WaitGroup
			errs := make([]error, tt.lookups)
			for i := range tt.lookups {
				wg.Go(func() { _, errs[i] = r.LookupIP(context.Background(), "a.test") })
			}
			waitFor(t, "every lookup to wait", func() bool {
				st := r.Stats()
				return st.Misses == tt.wantMisses && st.Coalesced == tt.wantJoin
			})
			for range tt.prefetches {
				r.Prefetch([]string{"a.test"})
			}
			open()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("lookup %d: %v", i, err)
				}
			}
			st := r.Stats()
			if got := srv.queries("a.test"); got != 1 || st.Queries != 1 {
				t.Fatalf("%d resolutions (stats %+v), want 1", got, st)
			}
			if st.Misses != tt.wantMisses || st.Coalesced != tt.wantJoin {
				t.Fatalf("stats %+v, want %d misses, %d coalesced", st, tt.wantMisses, tt.wantJoin)
			}
		})
	}
}
