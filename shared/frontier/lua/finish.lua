-- finish.lua: the finish decision (master only: a slave's Redis user may
-- not write the finish marks).

-- idle_now reports whether nothing is queued (the queued count includes
-- render tasks, and the render count is checked too), in flight or waiting
-- for retry
local function idle_now()
  local queued = tonumber(redis.call('HGET', K_STATS, 'queued') or '0')
  local rqueued = tonumber(redis.call('HGET', K_STATS, 'rqueued') or '0')
  if queued > 0 or rqueued > 0 or redis.call('ZCARD', K_RETRY) > 0 then
    return false
  end
  for _, slave in ipairs(FRESH.registry()) do
    if redis.call('ZCARD', k_slease(slave)) > 0 then return false end
  end
  return true
end

-- finish: decide whether the crawl is finished: idle (idle_now)
-- continuously for the quiescence window. Any function that queues work
-- clears idle_since (finish in cache.lua), so the window restarts whenever
-- work appears. Because leases, queues and retries only change inside the
-- library's functions, the check can never see "empty" while a slave holds
-- work.
--
-- KEYS: the meta key.
-- ARGV: prefix, quiescence_ms.
-- Returns: 1 when finished, 2 when idle but not yet for the window, else
-- 0.
register('finish', function()
  master_only()
  arg_count(2)
  local q = int(2, 0, 86400000, 'quiescence_ms')
  local now = now_ms()
  if redis.call('HGET', K.FINISH, 'finished') then return 1 end
  if not idle_now() then
    redis.call('HDEL', K.FINISH, 'idle_since')
    return 0
  end
  local since = redis.call('HGET', K.FINISH, 'idle_since')
  if not since then
    redis.call('HSET', K.FINISH, 'idle_since', now)
    return 2
  end
  if now - tonumber(since) >= q then
    redis.call('HSET', K.FINISH, 'finished', now)
    return 1
  end
  return 2
end, {settings = false})

-- idle: whether a shard is idle (idle_now), and its work counter (meta
-- workseq, bumped by every function that adds work: finish in cache.lua).
--
-- KEYS: the meta key.
-- ARGV: prefix.
-- Returns: {idle (1 or 0), workseq}.
register('idle', function()
  arg_count(1)
  local idle = 0
  if idle_now() then idle = 1 end
  return {idle, tonumber(redis.call('HGET', K_META, 'workseq') or '0')}
end, {settings = false, flags = {'no-writes'}})

-- finish_sharded: keep a sharded crawl's finish decision in shard 0's
-- finish hash: the first idle collect starts the window with its counters
-- (idle_sig), any collect that is not idle or shows other counters
-- restarts it, and an idle one with the same counters after the window
-- finishes the crawl.
--
-- KEYS: the meta key of shard 0.
-- ARGV: prefix, idle (1 or 0), sig, quiescence_ms.
-- Returns: 1 when finished, 2 when idle but not yet for the window, else
-- 0.
register('finish_sharded', function()
  master_only()
  arg_count(4)
  local idle, sig, q = flag(2, 'idle'), str(3, 4096, 'sig'), int(4, 0, 86400000, 'quiescence_ms')
  local now = now_ms()
  if redis.call('HGET', K.FINISH, 'finished') then return 1 end
  if not idle then
    redis.call('HDEL', K.FINISH, 'idle_since', 'idle_sig')
    return 0
  end
  local st = redis.call('HMGET', K.FINISH, 'idle_since', 'idle_sig')
  if not st[1] or st[2] ~= sig then
    redis.call('HSET', K.FINISH, 'idle_since', now, 'idle_sig', sig)
    return 2
  end
  if now - tonumber(st[1]) >= q then
    redis.call('HSET', K.FINISH, 'finished', now)
    return 1
  end
  return 2
end, {settings = false})
