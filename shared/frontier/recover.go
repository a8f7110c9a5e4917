package frontier

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// luaLose takes back one lease: the host slot is freed and kept idle for a
// delay (the lost fetch may still have reached the site), the task is
// requeued at the front of its queue (into its pq with the priority and
// aopic strategies, keeping its score; a render task into its host's render
// queues) with its attempt counted, or failed when its attempts are used,
// and a lost record goes to the event stream. zkey and hkey are the lease
// zset and hash that hold it: the slave's own (Keys.SlaveLease,
// SlaveLeaseData) or the legacy crawl-wide ones.
const luaLose = `
local function lose(zkey, hkey, url, data, reason, now, max_attempts, crawl)
  local d = lease_fields(data)
  local slave, leased_at, host, prio, task = d[1], tonumber(d[3]), d[4], d[5], d[6]
  redis.call('ZREM', zkey, url)
  redis.call('HDEL', hkey, url)
  host_done(host)
  local cur = host_next(host)
  local hd = host_delay(host)
  if after(now, hd) > cur then hset(K_HNEXT, host, after(now, hd)) end
  local attempt, failed, nt = requeue_or_fail(host, prio, task, max_attempts, 'lease lost: ' .. reason, now, crawl, slave)
  if not failed then push(host, prio, nt, true) end
  ready_host(host)
  stat('lost', 1)
  emit('lost', cjson.encode({crawl = crawl, url = url, slave = slave, leased_at = leased_at,
    detected_at = now, attempt = attempt, reason = reason}))
end

-- beat_host is the host name in a slave's last heartbeat, '' when none
local function beat_host(slave)
  local beat = redis.call('GET', k_sbeat(slave))
  if not beat then return '' end
  local ok, hb = pcall(cjson.decode, string.match(beat, '^[^\t]*\t(.*)$') or '')
  if ok and type(hb) == 'table' and type(hb.host) == 'string' then return hb.host end
  return ''
end

-- lose_all takes back every lease a slave holds; it returns how many
local function lose_all(slave, reason, now, max_attempts, crawl)
  local zkey, hkey = k_slease(slave), k_sld(slave)
  local all = redis.call('HGETALL', hkey)
  for k = 1, #all, 2 do
    lose(zkey, hkey, all[k], all[k + 1], reason, now, max_attempts, crawl)
  end
  redis.call('DEL', zkey)
  return #all / 2
end

-- expire_in takes back up to limit leases of one lease zset whose deadline
-- passed; it returns how many it looked at
local function expire_in(zkey, hkey, now, limit, max_attempts, crawl)
  if limit <= 0 then return 0 end
  local urls = redis.call('ZRANGEBYSCORE', zkey, '-inf', now, 'LIMIT', 0, limit)
  for _, url in ipairs(urls) do
    local data = redis.call('HGET', hkey, url)
    if data then
      lose(zkey, hkey, url, data, 'expired', now, max_attempts, crawl)
    else
      redis.call('ZREM', zkey, url)
    end
  end
  return #urls
end
`

// recoverExpiredScript takes back leases whose deadline passed, in the
// lease zset of every registered slave (and the legacy crawl-wide one).
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, max_attempts, crawl, limit, cfg.
// Returns: the number of leases taken back.
var recoverExpiredScript = redis.NewScript(luaPrelude + luaLose + `
local max_attempts, crawl, limit = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local n = expire_in(K_LEGACY_LEASE, K_LEGACY_LEASEDATA, now, limit, max_attempts, crawl)
for _, slave in ipairs(redis.call('ZRANGE', K_SLAVES, 0, -1)) do
  n = n + expire_in(k_slease(slave), k_sld(slave), now, limit - n, max_attempts, crawl)
end
finish()
return n
`)

// retireScript removes a slave from the registry and takes back every lease
// it still holds, recording its death or leave. The master runs it: it
// writes the registry, the control hash and the slave's own keys.
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, max_attempts, crawl, slave, kind (death, leave or gone), detail,
// record (1: record the death or leave here), cfg.
// Returns: the number of leases taken back.
var retireScript = redis.NewScript(luaPrelude + luaLose + `
local max_attempts, crawl = tonumber(ARGV[2]), ARGV[3]
local slave, kind, detail, record = ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1'
local now = now_ms()
local reason = 'slave_dead'
if kind == 'leave' then reason = 'slave_left' end
local n = lose_all(slave, reason, now, max_attempts, crawl)
-- leases of older versions, in the crawl-wide keys
local prefix = slave .. '\t'
local all = redis.call('HGETALL', K_LEGACY_LEASEDATA)
for k = 1, #all, 2 do
  if string.sub(all[k + 1], 1, #prefix) == prefix then
    lose(K_LEGACY_LEASE, K_LEGACY_LEASEDATA, all[k], all[k + 1], reason, now, max_attempts, crawl)
    n = n + 1
  end
end
local host = beat_host(slave)
-- the sink reads the slave's stream until it is drained (Stream)
if redis.call('EXISTS', k_sev(slave)) == 1 then redis.call('SADD', K_STREAMS, k_sev(slave)) end
local removed = redis.call('ZREM', K_SLAVES, slave)
redis.call('DEL', k_sbeat(slave), k_sld(slave))
-- gone: the slave left (its leave is recorded) or was retired before; a
-- lease it still holds makes it a death
if kind == 'gone' then
  if n > 0 then kind = 'death' else removed = 0 end
end
redis.call('HDEL', K_LEGACY_SLAVEINFO, slave)
redis.call('HDEL', K_CONTROL, 'drain:' .. slave)
if record and (removed == 1 or n > 0) then
  if n > 0 then detail = detail .. '; ' .. n .. ' leases taken back' end
  emit('slave', cjson.encode({crawl = crawl, slave = slave, kind = kind, host = host, at = now, detail = detail}))
end
finish()
return n
`)

// leaveScript is a slave's own graceful leave: it gives back the leases it
// still holds, records its leave and deletes its heartbeat. It writes only
// the slave's own keys and what a claim writes (queues, stats, events), so
// a slave's restricted Redis user may run it; the master's monitor then
// drops the slave from the registry (RetireGone).
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, max_attempts, crawl, slave, detail, record (1: record the
// leave here; shard 0 of a sharded crawl), cfg.
// Returns: the number of leases given back.
var leaveScript = redis.NewScript(luaPrelude + luaLose + `
local max_attempts, crawl = tonumber(ARGV[2]), ARGV[3]
local slave, detail, record = ARGV[4], ARGV[5], ARGV[6] == '1'
local own_err = check_own(slave)
if own_err then return own_err end
local now = now_ms()
local n = lose_all(slave, 'slave_left', now, max_attempts, crawl)
local host = beat_host(slave)
redis.call('DEL', k_sbeat(slave), k_sld(slave))
if n > 0 then detail = detail .. '; ' .. n .. ' leases taken back' end
if record then
  emit('slave', cjson.encode({crawl = crawl, slave = slave, kind = 'leave', host = host, at = now, detail = detail}))
end
finish()
return n
`)

// RecoverExpired implements Supervisor.
func (f *shard) RecoverExpired(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	res, err := f.run(ctx, recoverExpiredScript, f.opt.MaxAttempts, f.opt.Crawl, limit)
	if err != nil {
		return 0, wrap("recover expired leases", err)
	}
	n, _ := toInt(res)
	return int(n), nil
}

// RecoverSlave implements Supervisor.
func (f *shard) RecoverSlave(ctx context.Context, slave string) (int, error) {
	return f.retire(ctx, slave, "death", "heartbeats missed", true)
}

// retire runs retireScript; record says whether this shard records the
// slave's death or leave (shard 0 of a sharded crawl; the others record
// only the leases they take back).
func (f *shard) retire(ctx context.Context, slave, kind, detail string, record bool) (int, error) {
	res, err := f.run(ctx, retireScript, f.opt.MaxAttempts, f.opt.Crawl, slave, kind, detail, boolArg(record))
	if err != nil {
		return 0, wrap("retire slave "+slave, err)
	}
	n, _ := toInt(res)
	return int(n), nil
}

// finishScript decides whether the crawl is finished: nothing queued (the
// queued count includes render tasks, and the render count is checked too),
// in flight or waiting for retry, continuously for the quiescence window. Any
// script that queues work clears idle_since (finish), so the window
// restarts whenever work appears. Because leases, queues and retries only
// change inside scripts, the check can never see "empty" while a slave
// holds work.
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, quiescence_ms, cfg.
// Returns: 1 when finished, else 0.
var finishScript = redis.NewScript(luaPrelude + `
local q = tonumber(ARGV[2])
local now = now_ms()
if redis.call('HGET', K_FINISH, 'finished') then return 1 end
local queued = tonumber(redis.call('HGET', K_STATS, 'queued') or '0')
local rqueued = tonumber(redis.call('HGET', K_STATS, 'rqueued') or '0')
local leased = redis.call('ZCARD', K_LEGACY_LEASE)
for _, slave in ipairs(redis.call('ZRANGE', K_SLAVES, 0, -1)) do
  leased = leased + redis.call('ZCARD', k_slease(slave))
end
if queued > 0 or rqueued > 0 or leased > 0 or redis.call('ZCARD', K_RETRY) > 0 then
  redis.call('HDEL', K_FINISH, 'idle_since')
  return 0
end
local since = redis.call('HGET', K_FINISH, 'idle_since')
if not since then
  redis.call('HSET', K_FINISH, 'idle_since', now)
  return 0
end
if now - tonumber(since) >= q then
  redis.call('HSET', K_FINISH, 'finished', now)
  return 1
end
return 0
`)

// CheckFinished implements Supervisor.
func (f *shard) CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	res, err := f.run(ctx, finishScript, ms(quiescence))
	if err != nil {
		return false, wrap("check finished", err)
	}
	n, _ := toInt(res)
	return n == 1, nil
}
