// Seeding: seeds, recrawl seeds and requeued failures, split by the crawl
// (Redis) over the shards of their hosts and added by each shard (shard).

package frontier

import (
	"context"
	"fmt"
	"sort"
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
		return f.shards[0].seedWithPolicies(ctx, tasks, policies)
	}
	if f.opt.ScopeBySeeds && len(tasks) > 0 {
		if err := f.addScope(ctx, tasks); err != nil {
			return 0, err
		}
	}
	return f.seedEach(ctx, tasks, policies, (*shard).seedWithPolicies)
}

// Reseed implements the recrawl seeding of every shard (see shard.Reseed).
func (f *Redis) Reseed(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	var n int
	var err error
	if len(f.shards) == 1 {
		n, err = f.shards[0].reseed(ctx, tasks, policies)
	} else {
		n, err = f.seedEach(ctx, tasks, policies, (*shard).reseed)
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
	return wrap("reopen", f.shards[0].rdb.HDel(ctx, f.shards[0].keys.Finish, "idle_since", "idle_sig", "finished").Err())
}

// RequeueFailed implements Supervisor over every shard.
func (f *Redis) RequeueFailed(ctx context.Context, limit int) (int, error) {
	if len(f.shards) == 1 {
		return f.shards[0].requeueFailed(ctx, limit)
	}
	total := 0
	for k, s := range f.shards {
		n, err := s.requeueFailed(ctx, limit)
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

// seedBatch bounds the tasks and policies of one call.
const seedBatch = 1000

// seed is Redis.Seed on one shard.
func (f *shard) seed(ctx context.Context, tasks []Task) (int, error) {
	return f.seedWithPolicies(ctx, tasks, nil)
}

// seedWithPolicies is Seed that first sets hosts' politeness policies
// (keyed by Task.Host, as Completion.Policies), so that the seeds are
// claimed under them: the library's function seed (seed.lua). Policies go
// out before any task: a task is never queued before the policy of its
// host.
func (f *shard) seedWithPolicies(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	n, err := f.withPolicies(ctx, "seed", tasks, policies, nil)
	return n, wrap("seed", err)
}

// withPolicies calls a seeding function (seed, reseed) in batches: ARGV
// are the prefix, n, np, np policies, n tuples, what tail appends for the
// n tasks (nil: nothing).
// Policies go out before any task: a task is never queued before the
// policy of its host. It returns the sum of the script's counts.
func (f *shard) withPolicies(ctx context.Context, fn string, tasks []Task, policies map[string]HostPolicy,
	tail func([]any, []Task) []any) (int, error) {
	hosts := make([]string, 0, len(policies))
	for h := range policies {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	total := 0
	for len(tasks) > 0 || len(hosts) > 0 {
		np := min(len(hosts), seedBatch)
		n := 0
		if len(hosts) == np { // the last policies: tasks may follow
			n = min(len(tasks), seedBatch)
		}
		args := []any{n, np}
		for _, h := range hosts[:np] {
			args = append(args, policyArgs(h, policies[h])...)
		}
		hosts = hosts[np:]
		args = f.appendTuples(args, tasks[:n])
		if tail != nil {
			args = tail(args, tasks[:n])
		}
		res, err := f.callDurable(ctx, fn, args...)
		if err != nil {
			return total, err
		}
		added, err := toInt(res)
		if err != nil {
			return total, err
		}
		total += int(added)
		tasks = tasks[n:]
	}
	return total, nil
}
