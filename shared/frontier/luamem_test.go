package frontier_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestLibraryMemory checks the bounds on what the library keeps between
// calls (lua/base.lua: keys_of, name_cache, sweep) with a copy of the
// library whose bounds are small (frontier.SmallLibraryMemory): the key
// names of all crawls together stay within the names bound, the key
// tables within the prefixes bound, a crawl idle for two sweeps loses its
// table, and none of it changes what a crawl sees: a crawl whose names
// were dropped still knows every URL it was given.
func TestLibraryMemory(t *testing.T) {
	ctx := context.Background()
	rdb := testRedis(t)
	bound := frontier.SmallLibraryMemory
	prefixes, settings, names, sweep := int64(bound[0]), int64(bound[1]), int64(bound[2]), bound[4]

	open := func(name string) *frontier.Redis {
		f := newFrontier(t, rdb, name, nil)
		f.UseSmallLibraryMemory()
		return f
	}
	// urls are n URLs of crawl c over 20 hosts: 600 of them meet most of
	// a new crawl's 256 seen buckets, past the table and names bounds
	urls := func(c string, n int) []frontier.Task {
		out := make([]frontier.Task, n)
		for i := range out {
			out[i] = tk(fmt.Sprintf("http://h%d.%s.test/p%d", i%20, c, i), 1)
		}
		return out
	}
	seed := func(f *frontier.Redis, ts []frontier.Task) int {
		t.Helper()
		added := 0
		for i := 0; i < len(ts); i += 100 {
			n, err := f.Seed(ctx, ts[i:min(i+100, len(ts))])
			if err != nil {
				t.Fatal(err)
			}
			added += n
		}
		return added
	}
	look := func(f *frontier.Redis, other *frontier.Redis) frontier.LibraryMemory {
		t.Helper()
		p := ""
		if other != nil {
			p = other.Keys().Prefix
		}
		m, err := f.LibraryMemory(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if m.Names < 0 || m.Names > names || m.KeyTables < 1 || m.KeyTables > prefixes ||
			m.Settings < 0 || m.Settings > settings || m.SinceSweep < 0 || m.SinceSweep >= int64(sweep) {
			t.Fatalf("library memory %+v: outside the bounds (names %d, prefixes %d, settings %d, sweep %d)",
				m, names, prefixes, settings, sweep)
		}
		return m
	}

	a := open("mem-a")
	as := urls("a", 600)
	if got := seed(a, as); got != len(as) {
		t.Fatalf("crawl a: %d of %d URLs added", got, len(as))
	}
	if m := look(a, nil); m.Names == 0 {
		t.Fatalf("crawl a after 600 URLs: no names kept: %+v", m)
	}

	// more crawls than the prefixes bound, each past the names bound
	var last *frontier.Redis
	for i := range prefixes + 2 {
		last = open(fmt.Sprintf("mem-b%d", i))
		c := fmt.Sprintf("b%d", i)
		if got := seed(last, urls(c, 300)); got != 300 {
			t.Fatalf("crawl %s: %d of 300 URLs added", c, got)
		}
		look(last, nil)
	}

	// crawl a, its names long dropped, still knows its URLs
	if got := seed(a, as); got != 0 {
		t.Fatalf("crawl a seeded again: %d URLs added, want 0 (all seen)", got)
	}
	if m := look(last, a); !m.OtherKept {
		t.Fatalf("crawl a just used: no key table: %+v", m)
	}
	// two sweeps of calls on another crawl drop a's table
	for range 2 * sweep {
		look(last, nil)
	}
	if m := look(last, a); m.OtherKept {
		t.Fatalf("crawl a idle for two sweeps: its key table is kept: %+v", m)
	}
	// and a call of a makes it again
	if got := seed(a, urls("a", 700)); got != 100 {
		t.Fatalf("crawl a: %d of 700 URLs added, want the 100 new ones", got)
	}
	if m := look(last, a); !m.OtherKept {
		t.Fatalf("crawl a used again: no key table: %+v", m)
	}
}

// TestLibraryMemoryDefault reads the production library's memory: within
// its bounds, and the caller's table kept.
func TestLibraryMemoryDefault(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "mem-default", nil)
	if _, err := f.Seed(context.Background(), []frontier.Task{tk("http://a.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	m, err := f.LibraryMemory(context.Background(), f.Keys().Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !m.OtherKept || m.KeyTables < 1 || m.KeyTables > 256 || m.Names > 8192 || m.Settings < 1 || m.LuaKB <= 0 {
		t.Fatalf("library memory %+v: want its own table kept, at most 256 tables and 8,192 names, a settings, a Lua heap", m)
	}
}
