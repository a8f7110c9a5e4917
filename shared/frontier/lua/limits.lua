-- limits.lua: a crawl's limits (crawl.max_pages, max_items,
-- max_duration: limits.go), kept in shard 0's limits hash (K.LIMITS) while
-- the crawl has one: max_pages and max_items (0 = none) and timed (a
-- max_duration is set), which the master writes when it opens the crawl
-- (limits_set); pages, the pages stored and in flight (taken for claims,
-- less those no page came of), and items, the items the completions found
-- (limit_take); over, a limit the master's clock reached (max_duration:
-- Redis.LimitOver); ended, the limit that ended the crawl, written with
-- the finish mark (Redis.EndByLimit). A crawl without
-- a limit has no hash, and its slaves make no call here.
--
-- The file is one function, called at once: its helpers are its locals,
-- not the chunk's, which are at Lua's 200 in the section profile's copy.
;(function()

-- limits_read reads the limits hash
local function limits_read()
  local r = redis.call('HMGET', K.LIMITS, 'max_pages', 'max_items', 'pages', 'items', 'over', 'ended')
  return {max_pages = tonumber(r[1] or '0') or 0, max_items = tonumber(r[2] or '0') or 0,
    pages = tonumber(r[3] or '0') or 0, items = tonumber(r[4] or '0') or 0, over = r[5] or nil, ended = r[6] or nil}
end

-- limit_reached names the limit the hash h reaches ('' for none): over
-- first, then the items, then the pages
local function limit_reached(h)
  if h.over then return h.over end
  if h.max_items > 0 and h.items >= h.max_items then return 'max_items' end
  if h.max_pages > 0 and h.pages >= h.max_pages then return 'max_pages' end
  return ''
end

-- limit_take: take pages for a claim from the crawl's page limit, give
-- back those no page came of (a claim that did not lease them, a lease
-- that ended without a page: a retry, a robots.txt refusal, a release),
-- and count the items of the caller's completions. A claim asks for at
-- most the pages taken, so the crawl has no more pages stored and in
-- flight than max_pages, across every slave and shard, and claims none
-- once a limit is reached. Items count after their pages, so max_items is
-- passed by at most the items of the pages in flight.
--
-- KEYS: shard 0's meta key.
-- ARGV: prefix, pages (0 to LIMITS.claim: to take), back (0 to
-- LIMITS.items: given back), items (0 to LIMITS.items: found since the
-- caller's last call).
-- Returns: {pages taken (0 to pages; pages itself when the crawl has no
-- limit), the limit reached ('' for none)}.
register('limit_take', function()
  arg_count(4)
  local want = int(2, 0, LIMITS.claim, 'pages')
  local back, found = int(3, 0, LIMITS.items, 'back'), int(4, 0, LIMITS.items, 'items')
  if redis.call('EXISTS', K.LIMITS) == 0 then return {want, ''} end
  local h = limits_read()
  if found > 0 then h.items = redis.call('HINCRBY', K.LIMITS, 'items', found) end
  back = math.min(back, h.pages)
  if back > 0 then h.pages = redis.call('HINCRBY', K.LIMITS, 'pages', -back) end
  local reached = limit_reached(h)
  local took = 0
  if want > 0 and reached == '' then
    took = want
    if h.max_pages > 0 then took = math.min(want, h.max_pages - h.pages) end
    h.pages = redis.call('HINCRBY', K.LIMITS, 'pages', took)
    reached = limit_reached(h)
  end
  return {took, reached}
end, {settings = false})

-- limits_set: make the limits of a master's config the crawl's, when it
-- opens the crawl (master only). With none the hash goes; else max_pages,
-- max_items and timed are written, over is cleared (each master's run has
-- its own max_duration), and the counts, when absent, start from the
-- crawl's pages and items so far. A crawl a limit ended that its limits no
-- longer end is reopened: its ended and finish marks go, and the finisher
-- decides again.
--
-- KEYS: shard 0's meta key.
-- ARGV: prefix, max_pages, max_items (0 to LIMITS.limit, 0 = none), timed
-- (1: a max_duration is set), pages so far, items so far (0 to
-- LIMITS.limit).
-- Returns: {the limit the counts reach ('' for none), 1 when the crawl was
-- reopened, else 0}.
register('limits_set', function()
  master_only()
  arg_count(6)
  local max_pages, max_items = int(2, 0, LIMITS.limit, 'max_pages'), int(3, 0, LIMITS.limit, 'max_items')
  local timed = flag(4, 'timed')
  local pages, items = int(5, 0, LIMITS.limit, 'pages'), int(6, 0, LIMITS.limit, 'items')
  local ended = redis.call('HGET', K.LIMITS, 'ended')
  local reached = ''
  if max_pages == 0 and max_items == 0 and not timed then
    redis.call('DEL', K.LIMITS)
  else
    local t = '0'
    if timed then t = '1' end
    redis.call('HSET', K.LIMITS, 'max_pages', nstr(max_pages), 'max_items', nstr(max_items), 'timed', t)
    redis.call('HDEL', K.LIMITS, 'over')
    redis.call('HSETNX', K.LIMITS, 'pages', nstr(pages))
    redis.call('HSETNX', K.LIMITS, 'items', nstr(items))
    reached = limit_reached(limits_read())
  end
  local reopened = 0
  if ended and reached == '' then
    redis.call('HDEL', K.LIMITS, 'ended')
    redis.call('HDEL', K.FINISH, 'finished', 'idle_since', 'idle_sig')
    reopened = 1
  end
  return {reached, reopened}
end, {settings = false})

end)()
