package frontier

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// seedScript enqueues seeds that were never seen. With scope_by_seeds the
// seeds' host names become the crawl's host scope. Seeds count towards the
// trap caps but are never dropped by them.
//
// KEYS: the crawl's fixed keys (Keys.all).
// ARGV: prefix, conc, scope_by_seeds, n, then n × (bucket, field, host,
// scope_host, prio, task, qvar), then cfg.
// Returns: the number of seeds enqueued.
var seedScript = redis.NewScript(luaPrelude + `
local conc, scope_by_seeds, n = tonumber(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4])
local added = 0
for s = 0, n - 1 do
  local j = 5 + TUPLE * s
  if scope_by_seeds then redis.call('SADD', K_SCOPE, ARGV[j + 3]) end
  if redis.call('HSETNX', k_seen(ARGV[j]), ARGV[j + 1], '') == 1 then
    admit(ARGV[j + 2], ARGV[j + 6], false)
    push(ARGV[j + 2], ARGV[j + 4], ARGV[j + 5], conc, NEW_FRONT)
    redis.call('HINCRBY', K_STATS, 'seen', 1)
    added = added + 1
  end
end
reopen()
return added
`)

// seedBatch bounds the ARGV of one script call.
const seedBatch = 1000

// Seed implements Seeder.
func (f *Redis) Seed(ctx context.Context, tasks []Task) (int, error) {
	total := 0
	for len(tasks) > 0 {
		n := min(len(tasks), seedBatch)
		args := []any{f.opt.HostConcurrency, boolArg(f.opt.ScopeBySeeds), n}
		args = f.appendTuples(args, tasks[:n])
		res, err := f.run(ctx, seedScript, args...)
		if err != nil {
			return total, wrap("seed", err)
		}
		added, _ := toInt(res)
		total += int(added)
		tasks = tasks[n:]
	}
	return total, nil
}
