// The sharded Redis frontier's seeding: seeds, recrawl seeds and requeued
// failures go to the shard of their host.

package frontier

import (
	"context"
	"fmt"
)

// Seed implements Seeder.
func (f *Redis) Seed(ctx context.Context, tasks []Task) (int, error) {
	return f.SeedWithPolicies(ctx, tasks, nil)
}

// SeedWithPolicies implements PolicySeeder: each host's seeds and policy go
// to its shard. With scope by seeds, every shard learns every seed's host
// name, since a link's scope is checked on the link's shard.
func (f *Redis) SeedWithPolicies(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	if len(f.shards) == 1 {
		return f.shard.SeedWithPolicies(ctx, tasks, policies)
	}
	if f.opt.ScopeBySeeds && len(tasks) > 0 {
		if err := f.addScope(ctx, tasks); err != nil {
			return 0, err
		}
	}
	return f.seedEach(ctx, tasks, policies, (*shard).SeedWithPolicies)
}

// Reseed implements the recrawl seeding of every shard (see shard.Reseed).
func (f *Redis) Reseed(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	var n int
	var err error
	if len(f.shards) == 1 {
		n, err = f.shard.Reseed(ctx, tasks, policies)
	} else {
		n, err = f.seedEach(ctx, tasks, policies, (*shard).Reseed)
	}
	return n, err
}

func (f *Redis) seedEach(ctx context.Context, tasks []Task, policies map[string]HostPolicy,
	fn func(*shard, context.Context, []Task, map[string]HostPolicy) (int, error)) (int, error) {
	ts, ps := f.byShard(tasks), f.policiesByShard(policies)
	for k := range ps {
		if _, ok := ts[k]; !ok {
			ts[k] = nil
		}
	}
	total := 0
	for _, k := range sortedShards(ts) {
		n, err := fn(f.shards[k], ctx, ts[k], ps[k])
		total += n
		if n > 0 {
			f.woke(k)
		}
		if err != nil {
			return total, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	if total > 0 {
		if err := f.reopen(ctx); err != nil {
			return total, err
		}
	}
	return total, nil
}

// addScope adds the seeds' host names to every shard's scope.
func (f *Redis) addScope(ctx context.Context, tasks []Task) error {
	hosts := map[string]bool{}
	var names []string
	for _, t := range tasks {
		if !hosts[t.ScopeHost] {
			hosts[t.ScopeHost] = true
			names = append(names, t.ScopeHost)
		}
	}
	for k, s := range f.shards {
		// the shard's scope sets (Keys.ScopeMember), one pipeline
		byKey := map[string][]any{}
		for _, h := range names {
			key, m := s.keys.ScopeMember(h)
			byKey[key] = append(byKey[key], m)
		}
		pipe := s.rdb.Pipeline()
		for key, ms := range byKey {
			pipe.SAdd(ctx, key, ms...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return wrap(fmt.Sprintf("seed scope on shard %d", k), err)
		}
	}
	return nil
}

// reopen clears the finish marks (shard 0's) after work was added to a
// shard: the scripts of shard k>0 clear their own shard's marks only.
func (f *Redis) reopen(ctx context.Context) error {
	return wrap("reopen", f.rdb.HDel(ctx, f.keys.Finish, "idle_since", "idle_sig", "finished").Err())
}

// RequeueFailed implements Supervisor over every shard.
func (f *Redis) RequeueFailed(ctx context.Context, limit int) (int, error) {
	return f.requeueFailed(ctx, limit)
}

func (f *Redis) requeueFailed(ctx context.Context, limit int) (int, error) {
	if len(f.shards) == 1 {
		return f.shard.RequeueFailed(ctx, limit)
	}
	total := 0
	for k, s := range f.shards {
		n, err := s.RequeueFailed(ctx, limit)
		total += n
		if n > 0 {
			f.woke(k)
		}
		if err != nil {
			return total, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	if total > 0 {
		return total, f.reopen(ctx)
	}
	return total, nil
}
