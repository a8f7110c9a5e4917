package frontier

import (
	"context"
	"sort"

	"github.com/redis/go-redis/v9"
)

// seedScript enqueues seeds that were never seen. With scope_by_seeds the
// seeds' host names become the crawl's host scope. Seeds count towards the
// trap caps but are never dropped by them.
//
// Host policies come first, so the seeds of a host are queued under its
// policy; a policy already in force costs no write (set_policy).
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, scope_by_seeds, n, np, then np × policy (host, delay_ms,
// jitter, conc: see completeScript), then n × (bucket, field, host,
// scope_host, prio, task, qvar), then cfg.
// Returns: the number of seeds enqueued.
var seedScript = redis.NewScript(luaPrelude + `
local scope_by_seeds, n, np = ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4])
set_policies(5, np)
local added = 0
for s = 0, n - 1 do
  local j = 5 + 4 * np + TUPLE * s
  if scope_by_seeds then redis.call('SADD', K_SCOPE, ARGV[j + 3]) end
  if seen_add(ARGV[j], ARGV[j + 1]) then
    admit(ARGV[j + 2], ARGV[j + 6], false)
    push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
    stat('seen', 1)
    added = added + 1
  end
end
finish()
return added
`)

// seedBatch bounds the ARGV of one script call.
const seedBatch = 1000

// Seed implements Seeder.
func (f *shard) Seed(ctx context.Context, tasks []Task) (int, error) {
	return f.SeedWithPolicies(ctx, tasks, nil)
}

// SeedWithPolicies is Seed that first sets hosts' politeness policies
// (keyed by Task.Host, as Completion.Policies), so that the seeds are
// claimed under them. Policies go out before any task: a task is never
// queued before the policy of its host.
func (f *shard) SeedWithPolicies(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	n, err := f.withPolicies(ctx, seedScript, []any{boolArg(f.opt.ScopeBySeeds)}, tasks, policies, nil)
	return n, wrap("seed", err)
}

// withPolicies runs a seeding script (seedScript, reseedScript) in
// batches: ARGV are the prefix, head, n, np, np policies, n tuples, what
// tail appends for the n tasks (nil: nothing), cfg.
// Policies go out before any task: a task is never queued before the
// policy of its host. It returns the sum of the script's counts.
func (f *shard) withPolicies(ctx context.Context, script *redis.Script, head []any, tasks []Task, policies map[string]HostPolicy,
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
		args := append(append([]any{}, head...), n, np)
		for _, h := range hosts[:np] {
			args = append(args, policyArgs(h, policies[h])...)
		}
		hosts = hosts[np:]
		args = f.appendTuples(args, tasks[:n])
		if tail != nil {
			args = tail(args, tasks[:n])
		}
		res, err := f.run(ctx, script, args...)
		if err != nil {
			return total, err
		}
		added, _ := toInt(res)
		total += int(added)
		tasks = tasks[n:]
	}
	return total, nil
}
