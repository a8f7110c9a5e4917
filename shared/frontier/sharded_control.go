// The sharded Redis frontier's control, rules, robots, stats and finish
// over every shard.

package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redcrawl/redcrawl/shared/hashslot"
)

// Pause implements the admin's pause on every shard.
func (f *Redis) Pause(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.Pause(ctx) })
}

// Resume undoes Pause on every shard.
func (f *Redis) Resume(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.Resume(ctx) })
}

// Drain asks a slave to drain, on every shard.
func (f *Redis) Drain(ctx context.Context, slave string) (bool, error) {
	ok, err := f.shard.Drain(ctx, slave)
	if err != nil || !ok || len(f.shards) == 1 {
		return ok, err
	}
	for k, s := range f.shards[1:] {
		if err := s.rdb.HSet(ctx, s.keys.Control, ctlDrain+slave, time.Now().UnixMilli()).Err(); err != nil {
			return true, wrap(fmt.Sprintf("drain on shard %d", k+1), err)
		}
	}
	return true, nil
}

// RetireProxy retires a proxy on every shard's control hash.
func (f *Redis) RetireProxy(ctx context.Context, proxy string) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.RetireProxy(ctx, proxy) })
}

// eachShard runs fn on every shard, shard 0 last; its result is shard 0's.
func eachShard(f *Redis, fn func(*shard) (bool, error)) (bool, error) {
	for k := len(f.shards) - 1; k > 0; k-- {
		if _, err := fn(f.shards[k]); err != nil {
			return false, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return fn(f.shards[0])
}

// PutRules publishes a rule set to every shard (a claim returns its
// shard's version), shard 0 last: its channel tells the slaves.
func (f *Redis) PutRules(ctx context.Context, version string, blob []byte) error {
	if err := checkRulesVersion(version); err != nil {
		return err // before any shard has it
	}
	for k := len(f.shards) - 1; k > 0; k-- {
		s := f.shards[k]
		if err := s.rdb.HSet(ctx, s.keys.Rules, "version", version, "blob", blob).Err(); err != nil {
			return wrap(fmt.Sprintf("put rules on shard %d", k), err)
		}
	}
	return f.shard.PutRules(ctx, version, blob)
}

// GetRobots implements the robots.txt store on the host's shard.
func (f *Redis) GetRobots(ctx context.Context, host string) (RobotsRecord, bool, error) {
	return f.hostShard(host).GetRobots(ctx, host)
}

// PutRobots stores a robots.txt record on the host's shard.
func (f *Redis) PutRobots(ctx context.Context, host string, r RobotsRecord) error {
	return f.hostShard(host).PutRobots(ctx, host, r)
}

// PutRobotsTTL is PutRobots with a TTL.
func (f *Redis) PutRobotsTTL(ctx context.Context, host string, r RobotsRecord, ttl time.Duration) error {
	return f.hostShard(host).PutRobotsTTL(ctx, host, r, ttl)
}

// Stats implements Supervisor.
func (f *Redis) Stats(ctx context.Context) (Stats, error) {
	s, err := f.Snapshot(ctx)
	return s.Stats, err
}

// Snapshot reads the crawl's counters, clock, slaves and admin state: shard
// 0's, with the other shards' counters added and each shard's queues in
// Stats.Shards.
func (f *Redis) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := f.shard.Snapshot(ctx)
	if err != nil || len(f.shards) == 1 {
		return snap, err
	}
	part := func(k int, s Stats) ShardStats {
		return ShardStats{Shard: k, Slot: hashslot.Of(f.shards[k].keys.Meta), Queued: s.Queued, InFlight: s.InFlight, Retry: s.Retry, Done: s.Done, Seen: s.Seen, Hosts: s.Hosts}
	}
	st := &snap.Stats
	st.Shards = []ShardStats{part(0, *st)}
	for k, s := range f.shards[1:] {
		o, err := s.Stats(ctx) // this shard's alone
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

// CheckFinished implements Supervisor. With several shards it is a double
// collect: every shard's (idle, work counter) is read, then read again; the
// crawl is idle at the moment between the two reads when every shard was
// idle both times and no counter moved (work added anywhere bumps its
// shard's counter, and a link in transit holds its page's lease, so its
// source shard is not idle). It is finished after staying idle, with the
// same counters, for the quiescence window.
func (f *Redis) CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	st, err := f.FinishCheck(ctx, quiescence)
	return st == Finished, err
}

// FinishCheck is CheckFinished that also tells a busy crawl from one in
// its quiescence window (shard.FinishCheck).
func (f *Redis) FinishCheck(ctx context.Context, quiescence time.Duration) (FinishState, error) {
	if len(f.shards) == 1 {
		return f.shard.FinishCheck(ctx, quiescence)
	}
	collect := func() (bool, string, error) {
		idle, sig := true, ""
		for k, s := range f.shards {
			i, seq, err := s.idle(ctx)
			if err != nil {
				return false, "", fmt.Errorf("check finished: shard %d: %w", k, err)
			}
			idle = idle && i
			sig += strconv.FormatInt(seq, 10) + ","
		}
		return idle, sig, nil
	}
	idle1, sig1, err := collect()
	if err != nil {
		return Busy, err
	}
	idle, sig := false, ""
	if idle1 {
		idle2, sig2, err := collect()
		if err != nil {
			return Busy, err
		}
		idle, sig = idle2 && sig2 == sig1, sig2
	}
	n, err := f.callInt(ctx, "finish_sharded", boolArg(idle), sig, ms(quiescence))
	if err != nil {
		return Busy, wrap("check finished", err)
	}
	return FinishState(n), nil
}

// idle reads whether a shard has nothing queued, in flight or waiting for
// retry, and its work counter (the library's function idle: finish.lua).
func (f *shard) idle(ctx context.Context) (bool, int64, error) {
	arr, err := f.callSlice(ctx, "idle")
	if err != nil {
		return false, 0, wrap("idle", err)
	}
	if len(arr) != 2 {
		return false, 0, fmt.Errorf("idle: %d values", len(arr))
	}
	i, _ := toInt(arr[0])
	seq, _ := toInt(arr[1])
	return i == 1, seq, nil
}
