package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimScript leases up to max tasks from hosts whose next allowed time has
// come, first moving retries that are due back to their queues.
//
// KEYS: the crawl's fixed keys (Keys.all).
// ARGV: prefix, slave, max, lease_ms, conc, delay_ms, jitter, seed, cfg.
// Returns: a flat array, 6 entries per lease:
//
//	host, prio, task, token, leased_at_ms, deadline_ms
//
// (prio is the pq score, -importance, with the priority and aopic
// strategies, whose claim pops the host's best URL with ZPOPMIN)
// then a wait hint: ms until the earliest ready host's time comes, or -1
// when no host has a free slot and queued tasks.
//
// Politeness: a host is in the ready set only while it has queued tasks and
// fewer than conc requests in flight. A claim takes one task per host (all
// free slots when the delay is 0) and moves the host's next allowed time to
// now + the jittered delay (Options.JitterDist), so two request starts to one host are
// never closer than the delay, across all slaves. With conc = 1 the host
// leaves the ready set until the lease ends, and Complete sets its next
// time from the end of the fetch.
//
// aopic: when the lambda page holds at least aopic_lambda_min cash, it is
// first given back in equal shares to the best URL of each of the first 64
// ready hosts.
var claimScript = redis.NewScript(luaPrelude + `
local slave, maxn, lease_ms = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local conc, delay_ms, jitter = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
math.randomseed(tonumber(ARGV[8]))
local now = now_ms()

-- retries that are due go back to their queues
local due = redis.call('ZRANGEBYSCORE', K_RETRY, '-inf', now, 'LIMIT', 0, 256)
for _, m in ipairs(due) do
  redis.call('ZREM', K_RETRY, m)
  local host, prio, task = string.match(m, '^([^\t]*)\t([^\t]*)\t(.*)$')
  push(host, prio, task, conc, false)
end

if AOPIC then
  local lam = tonumber(redis.call('HGET', K_META, 'aopic_lambda') or '0')
  if lam > 0 and lam >= LAMBDA_MIN then
    local tops = {}
    for _, h in ipairs(redis.call('ZRANGE', K_READY, 0, 63)) do
      local top = redis.call('ZRANGE', k_pq(h), 0, 0)
      if #top > 0 then tops[#tops + 1] = {h, top[1]} end
    end
    if #tops > 0 then
      local share = lam / #tops
      for _, t in ipairs(tops) do redis.call('ZINCRBY', k_pq(t[1]), -share, t[2]) end
      redis.call('HINCRBYFLOAT', K_META, 'aopic_lambda', -lam)
    end
  end
end

local out = {}
local hosts = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now, 'LIMIT', 0, maxn)
local n = 0
for _, host in ipairs(hosts) do
  if n >= maxn then break end
  local infl = tonumber(redis.call('HGET', K_HINFL, host) or '0')
  local hd = tonumber(redis.call('HGET', K_HDELAY, host) or delay_ms)
  local take = 1
  if hd == 0 then take = conc - infl end
  while take > 0 and n < maxn and infl < conc do
    local prio, task
    if PQ then
      local top = redis.call('ZPOPMIN', k_pq(host))
      if #top == 0 then break end
      prio = top[2]
      task = (redis.call('HGET', K_PQDATA, top[1]) or '0\t0\t0') .. '\t' .. top[1]
      redis.call('HDEL', K_PQDATA, top[1])
    else
      local pr = redis.call('ZRANGE', k_prios(host), 0, 0)
      if #pr == 0 then break end
      prio = pr[1]
      local q = k_queue(host, prio)
      task = redis.call('LPOP', q)
      if redis.call('LLEN', q) == 0 then redis.call('ZREM', k_prios(host), prio) end
    end
    if task then
      local url = task_url(task)
      local token = redis.call('HINCRBY', K_META, 'leaseseq', 1)
      redis.call('HINCRBY', K_STATS, 'queued', -1)
      infl = redis.call('HINCRBY', K_HINFL, host, 1)
      redis.call('ZADD', K_LEASE, now + lease_ms, url)
      redis.call('HSET', K_LEASEDATA, url, slave .. '\t' .. token .. '\t' .. now .. '\t' .. host .. '\t' .. prio .. '\t' .. task)
      out[#out + 1] = host
      out[#out + 1] = prio
      out[#out + 1] = task
      out[#out + 1] = token
      out[#out + 1] = now
      out[#out + 1] = now + lease_ms
      n = n + 1
    end
    take = take - 1
  end
  local nxt = after(now, jittered(hd, jitter))
  local cur = tonumber(redis.call('HGET', K_HNEXT, host) or '0')
  if nxt > cur then redis.call('HSET', K_HNEXT, host, nxt) end
  ready_host(host, conc)
end
-- wait hint: ms until the earliest host is ready, -1 when none is queued
local first = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
if #first == 0 then
  out[#out + 1] = -1
else
  out[#out + 1] = math.max(0, tonumber(first[2]) - now)
end
reopen()
return out
`)

// Claim implements Frontier.
func (f *Redis) Claim(ctx context.Context, slave string, max int) ([]Lease, error) {
	ls, _, err := f.ClaimWait(ctx, slave, max)
	return ls, err
}

// ClaimWait is Claim that also says how long to wait before a host is
// ready (negative: no host has queued work and a free slot), so idle
// slaves sleep instead of polling.
func (f *Redis) ClaimWait(ctx context.Context, slave string, max int) ([]Lease, time.Duration, error) {
	if max <= 0 {
		return nil, 0, nil
	}
	res, err := f.run(ctx, claimScript, slave, max, ms(f.opt.LeaseDuration),
		f.opt.HostConcurrency, ms(f.opt.Delay), f.opt.Jitter, seed())
	if err != nil {
		return nil, 0, wrap("claim", err)
	}
	arr, _ := res.([]any)
	if len(arr)%6 != 1 {
		return nil, 0, fmt.Errorf("claim: script returned %d values", len(arr))
	}
	hint, _ := toInt(arr[len(arr)-1])
	wait := time.Duration(hint) * time.Millisecond
	if hint < 0 {
		wait = -1
	}
	arr = arr[:len(arr)-1]
	leases := make([]Lease, 0, len(arr)/6)
	for i := 0; i < len(arr); i += 6 {
		host, _ := arr[i].(string)
		var prio int64
		var importance float64
		if f.pq() {
			ps, _ := arr[i+1].(string)
			score, err := strconv.ParseFloat(ps, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("claim: score: %w", err)
			}
			importance = -score
		} else if prio, err = toInt(arr[i+1]); err != nil {
			return nil, 0, fmt.Errorf("claim: priority: %w", err)
		}
		task, _ := arr[i+2].(string)
		t, err := parseTask(host, prio, task)
		if err != nil {
			return nil, 0, fmt.Errorf("claim: %w", err)
		}
		token, _ := toInt(arr[i+3])
		at, _ := toInt(arr[i+4])
		dl, _ := toInt(arr[i+5])
		leases = append(leases, Lease{Task: t, Slave: slave, Token: token,
			LeasedAt: time.UnixMilli(at), Deadline: time.UnixMilli(dl), Importance: importance})
	}
	return leases, wait, nil
}
