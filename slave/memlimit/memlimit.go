// Package memlimit keeps a slave's soft Go memory limit (debug.SetMemoryLimit)
// where it does its job: a ceiling on how far the heap overshoots what the
// slave keeps live, never under that live heap itself.
//
// The automatic limit (config.SlaveMemoryLimit: 24 MiB plus the bodies in
// flight) is sized for a crawl of few hosts, where it holds a slave's RSS
// under 40 MB at no cost in CPU. A broad crawl keeps more live (a DNS
// entry, sessions and overload records for every host it met, idle
// connections), and a fixed limit under that live heap makes the
// collector run without pause. Follow keeps the limit a margin above what
// is live (Want) and lowers it again to the base when the live heap
// shrinks. docs/benchmarks.md has the measurements behind the numbers.
package memlimit

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
)

// GCPercent is the collector's pace (GOGC) under the automatic limit: a
// collection when the heap has grown by twice what is live, unless the
// limit comes first. A slave of few hosts meets the limit first; a broad
// crawl's collector marks its large live heap half as often as at GOGC
// 100.
const GCPercent = 200

// Want is the limit for a live heap of live bytes and other bytes of Go
// memory that are not heap (stacks, the runtime's own): base, or what is
// live plus room for the garbage between two collections when that is
// more.
//
// The room is a quarter of base while the live heap is at most half of
// base, so a slave of few hosts stays at the base (and under 40 MB of
// RSS). Past that it grows four times as fast as the live heap, up to
// twice the live heap (what GCPercent gives), because the collector's
// work grows with the live heap. A broad slave (one that knows BroadHosts
// hosts) gets twice the live heap from the start: its live heap is its
// hosts' state, and a smaller room would let the limit, not GCPercent,
// pace the collector.
func Want(base int64, live, other uint64, broad bool) int64 {
	room, full := base/4, int64(live)*GCPercent/100
	if over := int64(live) - base/2; over > 0 {
		room = max(room, min(full, base/4+4*over))
	}
	if broad {
		room = max(room, full)
	}
	return max(base, int64(live+other)+room)
}

// BroadHosts is how many hosts (Options.Hosts) make a slave's crawl
// broad for Want: ten times the 100 hosts of the crawl that holds a
// slave under 40 MB.
const BroadHosts = 1000

// Options configure Follow; the zero values are the process's own.
type Options struct {
	// Every is how often the live heap is read; 0 = 1 s.
	Every time.Duration
	// Read returns the heap live after the last collection and the Go
	// memory that is not heap; nil = the runtime's metrics.
	Read func() (live, other uint64)
	// Set sets the limit; nil = debug.SetMemoryLimit.
	Set func(int64)
	// Hosts returns how many hosts the slave knows now (its DNS cache's
	// entries: slaved.Slave.HostsKnown); nil = never broad.
	Hosts func() int
}

// Follow sets the limit to Want(base, live, other, broad) now and then
// every opt.Every until ctx ends, broad when opt.Hosts reports BroadHosts
// or more. It is meant to run in its own goroutine, for the process's
// life.
func Follow(ctx context.Context, base int64, opt Options) {
	if opt.Every <= 0 {
		opt.Every = time.Second
	}
	if opt.Read == nil {
		opt.Read = readMemory
	}
	if opt.Set == nil {
		opt.Set = func(n int64) { debug.SetMemoryLimit(n) }
	}
	want := func() int64 {
		live, other := opt.Read()
		return Want(base, live, other, opt.Hosts != nil && opt.Hosts() >= BroadHosts)
	}
	cur := want()
	opt.Set(cur)
	t := time.NewTicker(opt.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w := want(); w != cur {
			cur = w
			opt.Set(cur)
		}
	}
}

// Apply sets the process's soft memory limit from cfg, unless GOMEMLIMIT
// is set: slave.memory_limit when the config sets one; the automatic
// limit (config.SlaveMemoryLimit), followed as the live heap grows
// (Follow, in a goroutine that ends with ctx; hosts, which may be nil,
// is its Options.Hosts), with the collector's pace at GCPercent unless
// GOGC is set, when it is 0; none when it is -1.
func Apply(ctx context.Context, cfg *config.Config, hosts func() int) {
	lim := cfg.SlaveMemoryLimit()
	if lim <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if cfg.Slave.MemoryLimit > 0 {
		debug.SetMemoryLimit(lim)
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	go Follow(ctx, lim, Options{Hosts: hosts})
}

// readMemory reads the heap the last collection found live, and the Go
// memory the limit counts that is not heap: the total less the heap's
// objects, its free and unused parts and what was returned to the OS.
func readMemory() (live, other uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	heap := v[2] + v[3] + v[4] + v[5]
	if v[1] > heap {
		other = v[1] - heap
	}
	return v[0], other
}
