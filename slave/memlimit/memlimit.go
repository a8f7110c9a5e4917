// Package memlimit keeps a slave's soft Go memory limit (debug.SetMemoryLimit)
// where it does its job: a ceiling on how far the heap overshoots what the
// slave keeps live, never under that live heap itself.
//
// The automatic limit (config.SlaveMemoryLimit: 24 MiB plus the bodies in
// flight) is sized for a crawl of few hosts, where it holds a slave's RSS
// under 40 MB at no cost in CPU. A broad crawl keeps more live: a DNS entry
// for every host it met (dns.cache_size, 100,000 by default), sticky
// sessions and overload records per host, idle connections. On 20,000 hosts
// the live heap passed 22 MB, and under a fixed 28 MiB limit the garbage
// collector ran nearly without pause and the runtime returned memory to the
// OS after almost every allocation: the slave spent 2.2 ms of CPU a page
// instead of 0.47 (bin/bench --broad). Follow keeps the limit a margin
// above what is live (Want), so that it trims the overshoot without
// starving the collector, and lowers it again to the base when the live
// heap shrinks.
package memlimit

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
)

// GCPercent is the collector's pace (GOGC) under the automatic limit:
// a collection when the heap has grown by twice what is live, unless the
// limit comes first. For a slave of few hosts the limit comes first (its
// RSS stays under 40 MB as with GOGC 100); a broad crawl keeps 30 MB and
// more live (its hosts' DNS entries, sessions, connections) and allocates
// some 70 KB a page, and at GOGC 100 its collector marked that live heap
// ten times a second: a fifth of the slave's CPU (bin/bench --broad,
// docs/benchmarks.md). At 200 it collects half as often.
const GCPercent = 200

// Want is the limit for a live heap of live bytes and other bytes of Go
// memory that are not heap (stacks, the runtime's own): base, or what is
// live plus room for the garbage between two collections when that is
// more. The room is a quarter of base while the live heap is at most half
// of base: a slave of few hosts (10 MiB live, 10 other at 64 fetches in
// flight) stays at the base, which holds its RSS under 40 MB. Past that
// the room grows four times as fast as the live heap until it is twice
// the live heap, what GCPercent gives: the collector's work grows with
// the live heap, and a broad crawl's heap grows with its hosts (DNS
// entries, sessions, connections). With half the live heap as room, an
// earlier choice, a broad crawl's collector took a quarter of the slave's
// CPU; with the live heap (GOGC 100), a fifth.
//
// A slave that knows BroadHosts hosts or more (broad) gets twice the live
// heap as room from the start, what GCPercent gives: its live heap is
// those hosts' state, and in a broad crawl's first minute it is 12-25 MB,
// where the four-times ramp (or the live heap as room, an earlier choice)
// set the limit under the collector's own goal, so the limit, not
// GCPercent, paced it: 22 collections a second from the 2nd to the 10th
// second, 620 from the 2nd to the 40th (400 with this room), the
// collector's share of the slave's CPU twice the 20-host crawl's (master
// bench --broad, docs/benchmarks.md). The few-host slave keeps the base
// and its 40 MB.
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
