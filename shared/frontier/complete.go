package frontier

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// completeScript acknowledges a batch of leases. For each completion it
// checks the lease is still held by this slave with this token (a lost
// lease cannot be acked: nothing of it is applied), ends the lease, frees
// the host's slot and sets its next allowed time, applies the outcome,
// writes the events to the stream and enqueues the links that were never
// seen, all in one atomic step.
//
// A done page with a content hash is first looked up in the content
// buckets: when another URL had that content, the page is a duplicate, its
// links are not enqueued and a duplicate event names the first URL. A new
// link over a trap cap (host pages, query variants) is dropped and counted.
// With the priority strategy a link to a URL that is still queued adds X to
// its importance; with aopic the page's cash (its lease prio) is split:
// the tax to lambda, the rest equally among its new and still-queued links.
//
// A held completion's host policies (Completion.Policies) are applied
// first, before anything is requeued or enqueued, writing only what changes
// (set_policy). A render task (its task string's flag) goes back to its
// host's render queues on retry and release; links keep their own flag.
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, slave, max_attempts, scope_by_seeds, seed, crawl, n; then
// per completion:
//
//	url, token, outcome, host_delay_ms, backoff_ms, retry_in_ms, reason,
//	content_hash_hex, content_bucket, content_field, n_events, n_links,
//	n_policies, then n_events × (type, data), then n_policies × policy,
//	then n_links × tuple (luaPrelude)
//
// then cfg. outcome is done, retry, fail or release; content_bucket and
// content_field are the hash's shard.contentSlot, content_field "" when
// the hash is not checked. A policy is host, delay_ms, jitter, conc,
// each "" for the crawl's default (policyArgs).
// Returns: an array of n acks (1 held, 2 held but its links not followed:
// duplicate content; 0 lost) followed by the number of links enqueued.
var completeScript = redis.NewScript(completeSrc)

var completeSrc = luaPrelude + luaComplete + `
finish()
return acks
`

// luaComplete is the complete script up to its result: acks holds the n
// acks and the number of links enqueued; nothing is flushed yet (finish).
const luaComplete = `
local slave, max_attempts, scope_by_seeds = ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local own_err = check_own(slave)
if own_err then return own_err end
math.randomseed(tonumber(ARGV[5]))
local crawl, n = ARGV[6], tonumber(ARGV[7])
local now = now_ms()
local i = 8
local acks = {}
local added = 0
-- the leases' data, read in one HMGET up front; ended: the URLs whose
-- lease this script ended (a URL twice in a batch is then lost the second
-- time), whose lease and leasedata entries go in one ZREM and one HDEL at
-- the end: nothing in this script reads them again
local lease_urls, ended, ended_list = {}, {}, {}
do
  local j = 8
  for c = 1, n do
    lease_urls[c] = ARGV[j]
    local nev, nlinks, npol = tonumber(ARGV[j + 10]), tonumber(ARGV[j + 11]), tonumber(ARGV[j + 12])
    j = j + 13 + 2 * nev + 4 * npol + TUPLE * nlinks
  end
end
--[[mark:c_args]]
-- lease_data[c]: completion c's lease fields (lease_fields), false when
-- the URL has no lease
local lease_data = {}
do
  local hosts = {}
  local lds = hmget(k_sld(slave), lease_urls)
  --[[mark:c_lease_hmget]]
  for c, data in ipairs(lds) do
    local d = false
    if data then
      d = lease_fields(data)
      hosts[#hosts + 1] = d[4]
    end
    lease_data[c] = d
  end
  --[[mark:c_lease_fields]]
  -- the hosts' politeness fields, one HMGET per hash
  prefetch(hosts)
end
--[[mark:c_prefetch]]
-- in_scope caches SISMEMBER scopehosts (this script does not change it)
local in_scope = {}

-- aopic: pay a page's cash, the tax to lambda and the rest in equal shares
-- to targets (positive: ARGV index of a new link's tuple; negative: minus
-- the index of a still-queued link's tuple); all to lambda without targets
local function pay(cash, targets)
  if #targets == 0 then
    to_lambda(cash)
    return
  end
  to_lambda(cash * AOPIC_TAX)
  local share = cash * (1 - AOPIC_TAX) / #targets
  for _, j in ipairs(targets) do
    if j > 0 then
      push(ARGV[j + 2], -share, ARGV[j + 5], false)
    else
      redis.call('ZADD', kq_pq(is_render(ARGV[5 - j]), ARGV[2 - j]), 'XX', 'INCR', -share, task_url(ARGV[5 - j]))
    end
  end
end

for c = 1, n do
  local url, token, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local slave_delay, backoff, retry_in = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local reason, chash, cbucket, cfield = ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
  local nev, nlinks, npol = tonumber(ARGV[i + 10]), tonumber(ARGV[i + 11]), tonumber(ARGV[i + 12])
  local ev_at = i + 13
  local pol_at = ev_at + 2 * nev
  local links_at = pol_at + 4 * npol
  i = links_at + TUPLE * nlinks

  local d = lease_data[c]
  if ended[url] then d = false end
  local held = false
  if d then
    held = d[1] == slave and d[2] == token
  end
  if not held then
    acks[#acks + 1] = 0
  else
    acks[#acks + 1] = 1
    local host, prio, task = d[4], d[5], d[6]
    set_policies(pol_at, npol)
    ended[url] = true
    ended_list[#ended_list + 1] = url
    host_done(host)
    if slave_delay > 0 then hset(K_HDELAY, host, slave_delay) end
    local cur = host_next(host)
    local nxt = cur
    if outcome ~= 'release' and host_conc(host) == 1 then
      -- one request at a time: the next one starts a delay after this one ended
      nxt = math.max(nxt, after(now, jittered(host_delay(host), host_jitter(host))))
    end
    if backoff > 0 then nxt = math.max(nxt, after(now, backoff)) end
    if nxt ~= cur then hset(K_HNEXT, host, nxt) end

    if outcome == 'done' then
      stat('done', 1)
    elseif outcome == 'retry' then
      local attempt, failed, nt = requeue_or_fail(host, prio, task, max_attempts, reason, now, crawl, slave)
      if not failed then
        redis.call('ZADD', K_RETRY, now + retry_in, host .. '\t' .. prio .. '\t' .. nt)
        stat('retried', 1)
        work_added = true
      end
    elseif outcome == 'fail' then
      redis.call('RPUSH', K_FAILED, reason .. '\t' .. host .. '\t' .. prio .. '\t' .. task)
      stat('failed', 1)
      to_lambda(-tonumber(prio))
    elseif outcome == 'release' then
      push(host, prio, task, true)
    end
    ready_host(host)
    --[[mark:c_ack]]
    for e = 0, nev - 1 do
      emit(ARGV[ev_at + 2 * e], ARGV[ev_at + 2 * e + 1])
    end
    --[[mark:c_events]]
    if outcome == 'done' then
      local follow = true
      if cfield ~= '' then
        local ck = k_content(cbucket)
        if redis.call('HSETNX', ck, cfield, url) == 0 then
          local first = redis.call('HGET', ck, cfield)
          if first ~= url then
            follow = false
            acks[#acks] = 2
            stat('duplicates', 1)
            emit('duplicate', cjson.encode({crawl = crawl, url = url, first_url = first,
              content_hash = chash, slave = slave, at = now}))
          end
        end
      end
      --[[mark:c_content]]
      local targets -- aopic only
      if AOPIC then targets = {} end
      if follow then
        for l = 0, nlinks - 1 do
          local j = links_at + TUPLE * l
          local lhost = ARGV[j + 2]
          local took = take_link(j, scope_by_seeds, in_scope, crawl, slave, now)
          if took == 'new' then
            if AOPIC then
              targets[#targets + 1] = j
            else
              push(lhost, ARGV[j + 4], ARGV[j + 5], NEW_FRONT)
            end
            added = added + 1
          elseif took == 'old' and STRATEGY == 'priority' then
            -- one more backlink to a URL that is still queued
            redis.call('ZADD', kq_pq(is_render(ARGV[j + 5]), lhost), 'XX', 'INCR', -PRIO_X, task_url(ARGV[j + 5]))
          elseif took == 'old' and AOPIC and redis.call('ZSCORE', kq_pq(is_render(ARGV[j + 5]), lhost), task_url(ARGV[j + 5])) then
            targets[#targets + 1] = -j
          end
        end
      end
      if AOPIC then pay(-tonumber(prio), targets) end
      --[[mark:c_links]]
    end
  end
  --[[mark:c_other]]
end
acks[#acks + 1] = added
call_chunked('ZREM', k_slease(slave), ended_list, 1)
call_chunked('HDEL', k_sld(slave), ended_list, 1)
--[[mark:c_lease_end]]
`

// Complete implements Frontier.
func (f *shard) Complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	args, sent, err := f.completeArgs(slave, cs)
	if err != nil {
		return nil, err
	}
	res, err := f.run(ctx, completeScript, args...)
	if err != nil {
		return nil, wrap("complete", err)
	}
	arr, _ := res.([]any)
	if len(arr) != len(cs)+1 {
		return nil, fmt.Errorf("complete: script returned %d values for %d completions", len(arr), len(cs))
	}
	return f.acksOf(arr, sent), nil
}

// completeArgs builds the complete script's ARGV after the prefix (and
// before cfg) for cs; sent[i] holds the fingerprints of the links
// completion i sends (link cache only), for acksOf.
func (f *shard) completeArgs(slave string, cs []Completion) (args []any, sent [][]uint64, err error) {
	args = make([]any, 0, 8+14*len(cs))
	args = append(args, slave, f.opt.MaxAttempts, boolArg(f.opt.ScopeBySeeds), seed(), f.opt.Crawl, len(cs))
	sent = make([][]uint64, len(cs))
	for i, c := range cs {
		if c.Outcome < Done || c.Outcome > Release {
			return nil, nil, fmt.Errorf("complete %s: invalid outcome %d", c.Lease.URL, c.Outcome)
		}
		links := c.Links
		var fps []uint64 // the links' fingerprints, with the link cache
		if c.Outcome != Done {
			links = nil
		} else if f.links != nil {
			links, fps = f.unknownLinks(links)
			sent[i] = fps
		}
		chex, cb, cf := "", "", ""
		if c.ContentHash != 0 && c.Outcome == Done {
			chex = fmt.Sprintf("%016x", c.ContentHash)
			cb, cf = f.contentSlot(c.ContentHash)
		}
		args = append(args, c.Lease.URL, c.Lease.Token, c.Outcome.String(), ms(c.HostDelay),
			ms(c.Backoff), ms(c.RetryIn), c.Reason, chex, cb, cf, len(c.Events), len(links), len(c.Policies))
		for _, e := range c.Events {
			args = append(args, string(e.Type), e.Data)
		}
		args = appendPolicies(args, c.Policies)
		args = f.appendTuplesFP(args, links, fps)
	}
	return args, sent, nil
}

// acksOf reads the script's acks (the first len(sent) values: 1 held, 2
// held but its links not followed, 0 lost) and caches the links of the
// completions acked with their links followed.
func (f *shard) acksOf(arr []any, sent [][]uint64) []bool {
	acked := make([]bool, len(sent))
	for i := range sent {
		v, _ := toInt(arr[i])
		acked[i] = v >= 1
		if v == 1 {
			for _, fp := range sent[i] {
				f.links.add(fp)
			}
		}
	}
	return acked
}

// completeClaimScript acknowledges a batch of leases as completeScript
// does, then claims up to max tasks as claimScript does, in one atomic
// step: the host slots the acks free are claimable by this slave at once,
// before another slave's claim can take them, and one call's fixed cost
// serves both. The claim runs at the acks' time (one TIME call).
//
// KEYS: the meta key (Keys.all).
// ARGV: completeScript's ARGV without cfg, then max, lease_ms, render,
// then cfg.
// Returns: completeScript's n acks and links enqueued, then claimScript's
// result.
var completeClaimScript = redis.NewScript(completeClaimSrc)

var completeClaimSrc = luaPrelude + luaComplete + `
local maxn, lease_ms = tonumber(ARGV[#ARGV - 3]), tonumber(ARGV[#ARGV - 2])
local render = ARGV[#ARGV - 1] == '1'
local function claim_return(out)
  for _, v in ipairs(out) do acks[#acks + 1] = v end
  return acks
end
` + luaClaim

// CompleteClaim acknowledges cs and then claims up to max tasks, in one
// script (completeClaimScript): Complete followed by ClaimWaitOpts, in one
// round trip. With no completions it is ClaimWaitOpts; with max <= 0,
// Complete.
func (f *shard) CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if len(cs) == 0 {
		res, err := f.ClaimWaitOpts(ctx, slave, max, opts)
		return nil, res, err
	}
	if max <= 0 {
		acked, err := f.Complete(ctx, slave, cs)
		return acked, ClaimResult{}, err
	}
	args, sent, err := f.completeArgs(slave, cs)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	args = append(args, max, ms(f.opt.LeaseDuration), boolArg(opts.Render))
	res, err := f.run(ctx, completeClaimScript, args...)
	if err != nil {
		return nil, ClaimResult{}, wrap("complete and claim", err)
	}
	arr, _ := res.([]any)
	if len(arr) < len(cs)+1 {
		return nil, ClaimResult{}, fmt.Errorf("complete and claim: script returned %d values for %d completions", len(arr), len(cs))
	}
	acked := f.acksOf(arr, sent)
	cr, err := f.claimResult(slave, arr[len(cs)+1:])
	if err != nil {
		return acked, ClaimResult{}, fmt.Errorf("complete and claim: %w", err)
	}
	return acked, cr, nil
}

// unknownLinks returns the links not in the link cache and their
// fingerprints (each link hashed once).
func (f *shard) unknownLinks(links []Task) ([]Task, []uint64) {
	out := links[:0:0]
	fps := make([]uint64, 0, len(links))
	for _, l := range links {
		if fp := Fingerprint(l.URL); !f.links.has(fp) {
			out = append(out, l)
			fps = append(fps, fp)
		}
	}
	return out, fps
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendPolicies adds host policies as script ARGV, 4 each in host order:
// host, delay_ms, jitter, conc, each "" for the crawl's default (set_policy
// in luaPrelude).
func appendPolicies(args []any, ps map[string]HostPolicy) []any {
	hosts := make([]string, 0, len(ps))
	for h := range ps {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		args = append(args, policyArgs(h, ps[h])...)
	}
	return args
}

func policyArgs(host string, p HostPolicy) []any {
	delay, jitter, conc := "", "", ""
	if d := ms(p.Delay); d > 0 {
		delay = strconv.FormatInt(d, 10)
	} else if p.Delay > 0 {
		delay = "1" // under a millisecond: the least override there is
	}
	if p.Jitter >= 0 {
		jitter = fmtFloat(p.Jitter)
	}
	if p.Concurrency > 0 {
		conc = strconv.Itoa(p.Concurrency)
	}
	return []any{host, delay, jitter, conc}
}
