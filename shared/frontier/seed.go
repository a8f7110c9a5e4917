package frontier

import (
	"context"
	"sort"
)

// seedBatch bounds the tasks and policies of one call.
const seedBatch = 1000

// Seed implements Seeder.
func (f *shard) Seed(ctx context.Context, tasks []Task) (int, error) {
	return f.SeedWithPolicies(ctx, tasks, nil)
}

// SeedWithPolicies is Seed that first sets hosts' politeness policies
// (keyed by Task.Host, as Completion.Policies), so that the seeds are
// claimed under them: the library's function seed (seed.lua). Policies go
// out before any task: a task is never queued before the policy of its
// host.
func (f *shard) SeedWithPolicies(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
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
