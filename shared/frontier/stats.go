package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redcrawl/redcrawl/shared/hashslot"
)

// Stats implements Supervisor.
func (f *Redis) Stats(ctx context.Context) (Stats, error) {
	s, err := f.Snapshot(ctx)
	return s.Stats, err
}

// Snapshot reads the crawl's counters, clock, slaves and admin state: shard
// 0's, with the other shards' counters added and each shard's queues in
// Stats.Shards.
func (f *Redis) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := f.shards[0].snapshot(ctx)
	if err != nil || len(f.shards) == 1 {
		return snap, err
	}
	part := func(k int, s Stats) ShardStats {
		return ShardStats{Shard: k, Slot: hashslot.Of(f.shards[k].keys.Meta), Queued: s.Queued, InFlight: s.InFlight, Retry: s.Retry, Done: s.Done, Seen: s.Seen, Hosts: s.Hosts}
	}
	st := &snap.Stats
	st.Shards = []ShardStats{part(0, *st)}
	for k, s := range f.shards[1:] {
		o, err := s.stats(ctx) // this shard's alone
		if err != nil {
			return snap, fmt.Errorf("shard %d: %w", k+1, err)
		}
		st.Shards = append(st.Shards, part(k+1, o))
		st.Queued += o.Queued
		st.InFlight += o.InFlight
		st.Retry += o.Retry
		if o.NextRetryAt > 0 && (st.NextRetryAt == 0 || o.NextRetryAt < st.NextRetryAt) {
			st.NextRetryAt = o.NextRetryAt
		}
		st.Done += o.Done
		st.Failed += o.Failed
		st.Seen += o.Seen
		st.Lost += o.Lost
		st.Retried += o.Retried
		st.Duplicates += o.Duplicates
		st.TrapDropped += o.TrapDropped
		st.Hosts += o.Hosts
		st.RenderQueued += o.RenderQueued
		st.Requeued += o.Requeued
		st.Reseeded += o.Reseeded
	}
	return snap, nil
}

// Snapshot is Stats with what it is computed from: Redis's clock, the
// registered slaves' last heartbeats, and the slaves asked to drain.
type Snapshot struct {
	Stats
	Now      time.Time
	Slaves   []SlaveInfo
	Draining map[string]bool
}

// stats is Redis.Stats on one shard.
func (f *shard) stats(ctx context.Context) (Stats, error) {
	s, err := f.snapshot(ctx)
	return s.Stats, err
}

// snapshot reads the crawl's counters, clock, slaves and admin state in
// one round trip (the dashboard's overview), the slaves and leases held by
// the library's function snapshot (registry.lua).
func (f *shard) snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := f.readSnapshot(ctx)
	if isNoFunction(err) && f.opt.Slave == "" {
		// first use on this Redis: load, read again
		if lerr := loadLibrary(ctx, f.rdb, f.library()); lerr != nil {
			return Snapshot{}, wrap("stats", lerr)
		}
		snap, err = f.readSnapshot(ctx)
	}
	return snap, err
}

func (f *shard) readSnapshot(ctx context.Context) (Snapshot, error) {
	pipe := f.rdb.Pipeline()
	tm := pipe.Time(ctx)
	st := pipe.HGetAll(ctx, f.keys.Stats)
	reg := pipe.FCallRo(ctx, f.library().fn("snapshot"), f.allKeys, f.keys.Prefix)
	retry := pipe.ZCard(ctx, f.keys.Retry)
	nextRetry := pipe.ZRangeWithScores(ctx, f.keys.Retry, 0, 0)
	finish := pipe.HGetAll(ctx, f.keys.Finish)
	ready := pipe.ZCard(ctx, f.keys.Ready)
	fresh := pipe.HLen(ctx, f.keys.Fresh)
	control := pipe.HGetAll(ctx, f.keys.Control)
	limits := pipe.HGetAll(ctx, f.keys.Limits)
	if _, err := pipe.Exec(ctx); err != nil {
		return Snapshot{}, wrap("stats", err)
	}
	get := func(m map[string]string, k string) int64 {
		v, _ := strconv.ParseInt(m[k], 10, 64)
		return v
	}
	regArr, _ := reg.Val().([]any)
	var inFlight int64
	if len(regArr) > 0 {
		inFlight, _ = toInt(regArr[len(regArr)-1])
		regArr = regArr[:len(regArr)-1]
	}
	s := Stats{
		Crawl:    f.opt.Crawl,
		Queued:   get(st.Val(), "queued"),
		InFlight: inFlight,
		Retry:    retry.Val(),
		NextRetryAt: func() int64 {
			if z := nextRetry.Val(); len(z) > 0 {
				return int64(z[0].Score)
			}
			return 0
		}(),
		Done:    get(st.Val(), "done"),
		Failed:  get(st.Val(), "failed"),
		Seen:    get(st.Val(), "seen"),
		Lost:    get(st.Val(), "lost"),
		Retried: get(st.Val(), "retried"),

		Duplicates:  get(st.Val(), "duplicates"),
		TrapDropped: get(st.Val(), "trap_dropped"),
		Hosts:       ready.Val() + fresh.Val(),

		RenderQueued: get(st.Val(), "rqueued"),
		Requeued:     get(st.Val(), "requeued"),
		Reseeded:     get(st.Val(), "reseeded"),
		RecrawlRun:   get(st.Val(), statRecrawlRun),
		RecrawlAt:    get(st.Val(), statRecrawlAt),
	}
	s.Limits = limitStats(limits.Val())
	s.PausedSince = pausedSince(control.Val()[ctlPaused])
	s.Paused = !s.PausedSince.IsZero()
	if fa := get(finish.Val(), "finished"); fa > 0 {
		s.Finished, s.FinishedAt = true, fa
	}
	snap := Snapshot{Stats: s, Now: tm.Val(), Draining: drainingOf(control.Val())}
	registered, render, err := decodeRegistry(regArr)
	if err != nil {
		return snap, err
	}
	for _, sl := range registered {
		if sl.Gone {
			continue
		}
		snap.Slaves = append(snap.Slaves, sl)
		if snap.Now.Sub(sl.LastSeen) <= f.opt.DeadAfter {
			snap.SlavesAlive++
			snap.PagesPerSec += sl.PagesPerSec
			if render[sl.Slave] {
				snap.RenderSlaves++
			}
		}
	}
	return snap, nil
}
