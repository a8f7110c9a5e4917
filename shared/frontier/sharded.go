package frontier

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/hashslot"
)

// A crawl of S shards is S complete frontiers (shard), each under its own
// hash tag: shard 0 keeps the crawl's own crawl:{name}:… (so a crawl of one
// shard is today's layout), shard k>0 is crawl:{name:k}:…. A Redis Cluster
// puts the tags' slots on whatever nodes own them.
//
// A host belongs to one shard, by jump consistent hashing (Lamping and
// Veach) of its FNV-1a hash: no ring to store, an even spread (each shard
// gets 1/S of the hosts to within sampling noise, where a ring of 100
// virtual points per shard is off by ~10%), and a key's shard computed in
// a few nanoseconds on every process alike. Growing S would move only
// 1/(S+1) of the hosts, but S is fixed when the crawl is created. A host's
// queues, politeness state, robots.txt record, caps and seen URLs live in
// its shard, so politeness and dedup stay exact across all slaves.
//
// Shard 0 also holds what is crawl-wide: the slave registry and
// heartbeats, the control hash (written to every shard, read from 0), the
// rules (likewise) and the finish marks (and a legacy seed set, which
// MoveLegacySeeds empties; the seeds are recorded in MySQL).
//
// Links found on a page of shard A for a host of shard B are enqueued on B
// first (linksScript, one call per remote shard per ack batch), then the
// page is completed on A: a slave dying in between leaves A's lease to
// expire, the page is fetched again and its links are dropped by B's
// dedup — at least once, never lost. Content dedup is per shard: a page
// whose body another host of another shard already had is not caught
// (mirrors across shards); a crawl-wide check would cost one more call to
// the fingerprint's shard per page. With the aopic strategy a link to
// another shard starts with a seed's cash (its share of the page's cash
// stays on the page's shard); with priority its backlinks are counted on
// its own shard as usual.

// Redis is the Redis implementation of Frontier, Seeder, Supervisor and
// Registry, over one shard or several. Its embedded *shard is shard 0, so
// a crawl of one shard runs exactly today's code.
type Redis struct {
	*shard
	shards []*shard
	home   int // the shard this slave prefers (Options.Slave)
	// quiet[c][k]: claims of class c (0 static, 1 with render tasks) skip
	// shard k for a while after it had nothing to lease (claimSharded)
	quiet [2][]quietMark
}

// quietMark is one shard's quiet for one class of claims: until when
// (unix ms), and why: a host ready at readyAt (ms; 0: none known), or
// every host with work busy.
type quietMark struct {
	until, readyAt atomic.Int64
	busy           atomic.Bool
}

// How long a claim leaves a shard alone after it had nothing to lease:
// nothing queued or in flight there (quietEmpty), or every host holding
// work at its concurrency or requests in flight whose acks may bring links
// (quietBusy). A shard's hint that its next host is ready in d ms counts
// for itself. Work this process adds to a shard ends its quiet at once;
// work another slave adds (links to a shard that was idle) is found within
// quietEmpty, short enough not to slow a small crawl's start: an idle slave
// asks each other shard 4 times a second, about 30 µs of Redis each.
const (
	quietEmpty = 250 * time.Millisecond
	quietBusy  = 20 * time.Millisecond
)

// NewRedis opens a crawl's frontier. The crawl's bucket layout, strategy,
// dedup mode and shard count are fixed the first time any process opens
// it; later processes read them from Redis.
func NewRedis(ctx context.Context, rdb redis.UniversalClient, opt Options) (*Redis, error) {
	opt, want, err := normalize(opt)
	if err != nil {
		return nil, err
	}
	if opt.Slave == "" {
		// a master's (or an admin's) process: the library of this version,
		// with this code, on every primary
		if err := LoadLibrary(ctx, rdb); err != nil {
			return nil, fmt.Errorf("new frontier: %w", err)
		}
	}
	if opt.Shards < 1 {
		opt.Shards = 1
	}
	if opt.Shards > maxShards {
		return nil, fmt.Errorf("new frontier: crawl.shards %d: at most %d", opt.Shards, maxShards)
	}
	n, tags, err := shardCount(ctx, rdb, opt, NewKeys(opt.Crawl), opt.Shards)
	if err != nil {
		return nil, err
	}
	if n != opt.Shards {
		return nil, fmt.Errorf("new frontier: crawl %q was created with %d shards, not %d (crawl.shards)", opt.Crawl, n, opt.Shards)
	}
	per := opt
	if n > 1 {
		// each shard holds about 1/n of the URLs: bytes per seen URL stay
		// what one frontier sized right pays
		per.ExpectedURLs = (opt.ExpectedURLs + int64(n) - 1) / int64(n)
		if opt.DedupMode == DedupBloom {
			if want, err = newBloomSize(per.ExpectedURLs, opt.FalsePositiveRate); err != nil {
				return nil, fmt.Errorf("new frontier: %w", err)
			}
		}
	}
	f := &Redis{shards: make([]*shard, n)}
	f.quiet[0], f.quiet[1] = make([]quietMark, n), make([]quietMark, n)
	for k := range n {
		keys := NewKeys(opt.Crawl)
		if k > 0 {
			keys = NewKeys(tags[k-1])
		}
		s, err := newShard(ctx, rdb, per, keys, want)
		if err != nil {
			if n > 1 {
				err = fmt.Errorf("shard %d: %w", k, err)
			}
			return nil, err
		}
		s.index = k
		if k > 0 {
			s.tag = "~" + strconv.Itoa(k)
		}
		f.shards[k] = s
	}
	f.shard = f.shards[0]
	if opt.Slave != "" {
		f.home = JumpHash(hashString(opt.Slave), n)
	}
	return f, nil
}

// ShardKeys returns the default keys of shard k of a crawl: the crawl's
// own for shard 0, crawl:{name:k}:… for the others. A crawl created on a
// Redis Cluster may have placed its shards under other tags
// (placement.go): Redis.ShardKeysOf gives the keys in use.
func ShardKeys(crawl string, k int) Keys {
	if k == 0 {
		return NewKeys(crawl)
	}
	return NewKeys(crawl + ":" + strconv.Itoa(k))
}

// shardCount fixes a crawl's shard count and its shards' hash tags
// (placeShards) in shard 0's meta the first time any process opens it
// (the library's function shard_count: admin.lua), and returns them.
func shardCount(ctx context.Context, rdb redis.UniversalClient, opt Options, root Keys, want int) (int, []string, error) {
	s := &shard{rdb: rdb, opt: opt, keys: root, allKeys: root.all()}
	place, err := placeShards(ctx, rdb, opt.Crawl, min(want, maxShards))
	if err != nil {
		return 0, nil, fmt.Errorf("new frontier: %w", err)
	}
	res, err := s.callSlice(ctx, "shard_count", min(want, maxShards), strings.Join(place, ","))
	if err != nil || len(res) != 2 {
		return 0, nil, wrap("new frontier: shard count", cmpErr(err, fmt.Errorf("%d values", len(res))))
	}
	n64, err := toInt(res[0])
	n := int(n64)
	if err != nil || n < 1 {
		return 0, nil, fmt.Errorf("new frontier: invalid shard count %v", res[0])
	}
	field, _ := res[1].(string)
	tags, err := parseShardTags(opt.Crawl, field, n)
	if err != nil {
		return 0, nil, fmt.Errorf("new frontier: %w", err)
	}
	return n, tags, nil
}

// JumpHash is Lamping and Veach's jump consistent hash: the bucket in
// [0, n) of a 64-bit key.
func JumpHash(key uint64, n int) int {
	if n <= 1 {
		return 0
	}
	var b, j int64 = -1, 0
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// NumShards returns the crawl's shard count.
func (f *Redis) NumShards() int { return len(f.shards) }

// ShardOf returns the shard of a host (Task.Host).
func (f *Redis) ShardOf(host string) int { return ShardOfHost(host, len(f.shards)) }

// ShardOfHost returns the shard of a host (Task.Host) in a crawl of n
// shards.
func ShardOfHost(host string, n int) int { return JumpHash(hashString(host), n) }

// ShardKeysOf returns the keys of shard k.
func (f *Redis) ShardKeysOf(k int) Keys { return f.shards[k].keys }

// Home returns the shard this slave prefers.
func (f *Redis) Home() int { return f.home }

func (f *Redis) hostShard(host string) *shard { return f.shards[f.ShardOf(host)] }

// byShard groups tasks by their hosts' shards.
func (f *Redis) byShard(tasks []Task) map[int][]Task {
	out := map[int][]Task{}
	for _, t := range tasks {
		k := f.ShardOf(t.Host)
		out[k] = append(out[k], t)
	}
	return out
}

// policiesByShard groups host policies by their hosts' shards.
func (f *Redis) policiesByShard(ps map[string]HostPolicy) map[int]map[string]HostPolicy {
	out := map[int]map[string]HostPolicy{}
	for h, p := range ps {
		k := f.ShardOf(h)
		if out[k] == nil {
			out[k] = map[string]HostPolicy{}
		}
		out[k][h] = p
	}
	return out
}

// sortedShards returns the keys of m in order.
func sortedShards[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

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

// Claim implements Frontier; it never returns render tasks.
func (f *Redis) Claim(ctx context.Context, slave string, max int) ([]Lease, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, max, ClaimOptions{})
	return res.Leases, err
}

// ClaimWait is Claim with the wait hint (see ClaimResult.Wait).
func (f *Redis) ClaimWait(ctx context.Context, slave string, max int) ([]Lease, time.Duration, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, max, ClaimOptions{})
	return res.Leases, res.Wait, err
}

// ClaimWaitOpts implements RenderClaimer: a slave claims from its home
// shard first and fills the rest of max from the other shards in turn
// (claimSharded).
func (f *Redis) ClaimWaitOpts(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error) {
	if len(f.shards) == 1 {
		return f.shard.ClaimWaitOpts(ctx, slave, max, opts)
	}
	return f.claimSharded(ctx, slave, max, opts, nil)
}

// claimSharded claims up to max tasks: the home shard's first (home, when
// a CompleteClaim already claimed there), then from each other shard,
// starting after the home shard, until max is filled. A shard that had
// nothing to lease is left alone for a while (quiet: its own hint, or
// quietEmpty / quietBusy), so an idle slave polls its home shard at its
// idle pace and each other shard every quietEmpty, not S times as
// often. The result's wait hint is the soonest of the shards asked or
// left alone.
func (f *Redis) claimSharded(ctx context.Context, slave string, max int, opts ClaimOptions, home *ClaimResult) (ClaimResult, error) {
	n := len(f.shards)
	now := time.Now().UnixMilli()
	var out ClaimResult
	var wait int64 = -1 // ms; -1: none known
	busy := false
	hint := func(r ClaimResult) {
		switch {
		case r.Wait >= 0:
			if w := r.Wait.Milliseconds(); wait < 0 || w < wait {
				wait = w
			}
		case r.Busy:
			busy = true
		}
	}
	class := 0
	if opts.Render {
		class = 1
	}
	first := true
	for i := 0; i < n && len(out.Leases) < max; i++ {
		k := (f.home + i) % n
		mark := &f.quiet[class][k]
		var res ClaimResult
		if i == 0 && home != nil {
			res = *home
		} else {
			if i > 0 && mark.until.Load() > now {
				if r := mark.readyAt.Load(); r > 0 {
					if w := r - now; wait < 0 || w < wait {
						wait = w
					}
				} else if mark.busy.Load() {
					busy = true
				}
				continue
			}
			var err error
			res, err = f.shards[k].ClaimWaitOpts(ctx, slave, max-len(out.Leases), opts)
			if err != nil {
				if len(out.Leases) > 0 {
					break // keep what was leased; the next claim asks again
				}
				return out, fmt.Errorf("shard %d: %w", k, err)
			}
		}
		if first {
			out.RulesVersion = res.RulesVersion
			first = false
		}
		if len(res.Leases) > 0 {
			mark.until.Store(0)
			out.Leases = append(out.Leases, res.Leases...)
			continue
		}
		hint(res)
		switch {
		case res.Wait >= 0:
			mark.readyAt.Store(now + res.Wait.Milliseconds())
			mark.busy.Store(false)
			mark.until.Store(now + res.Wait.Milliseconds())
		case res.Busy:
			mark.readyAt.Store(0)
			mark.busy.Store(true)
			mark.until.Store(now + quietBusy.Milliseconds())
		default:
			mark.readyAt.Store(0)
			mark.busy.Store(false)
			mark.until.Store(now + quietEmpty.Milliseconds())
		}
	}
	if len(out.Leases) == 0 {
		out.Wait, out.Busy = -1, busy
		if wait >= 0 {
			out.Wait, out.Busy = time.Duration(wait)*time.Millisecond, false
		}
	}
	return out, nil
}

// WakeAll ends every shard's quiet: work was announced (WorkMessage), on
// shards this process cannot tell.
func (f *Redis) WakeAll() {
	for k := range f.shards {
		f.woke(k)
	}
}

// woke ends shard k's quiet: this process just added work there.
func (f *Redis) woke(k int) {
	for c := range f.quiet {
		if f.quiet[c] != nil {
			f.quiet[c][k].until.Store(0)
		}
	}
}

// Complete implements Frontier.
func (f *Redis) Complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
	if len(f.shards) == 1 {
		return f.shard.Complete(ctx, slave, cs)
	}
	acked, _, err := f.completeSharded(ctx, slave, cs, 0, ClaimOptions{})
	return acked, err
}

// CompleteClaim implements CompleteClaimer: the links for other shards
// first, then the completions of each shard, the home shard's with the
// claim.
func (f *Redis) CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if len(f.shards) == 1 {
		return f.shard.CompleteClaim(ctx, slave, cs, max, opts)
	}
	return f.completeSharded(ctx, slave, cs, max, opts)
}

func (f *Redis) completeSharded(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	idx, local, remote, remotePol, err := f.splitCompletions(cs)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	if err := f.sendRemote(ctx, slave, remote, remotePol); err != nil {
		return nil, ClaimResult{}, err
	}
	for k := range idx {
		f.woke(k) // a host slot freed, links, a retry or a release
	}
	return f.completeLocal(ctx, slave, idx, local, max, opts)
}

// splitCompletions puts each completion on its lease's shard with the
// links and policies of that shard's hosts (local, by index; idx lists
// each shard's), and the other links and policies by the shard they go to.
func (f *Redis) splitCompletions(cs []Completion) (idx map[int][]int, local []Completion,
	remote map[int][]Task, remotePol map[int]map[string]HostPolicy, err error) {
	idx = map[int][]int{}
	local = make([]Completion, len(cs))
	remote = map[int][]Task{}
	remotePol = map[int]map[string]HostPolicy{}
	for i, c := range cs {
		k := c.Lease.Shard
		if k < 0 || k >= len(f.shards) {
			return nil, nil, nil, nil, fmt.Errorf("complete %s: lease of shard %d, the crawl has %d", c.Lease.URL, k, len(f.shards))
		}
		idx[k] = append(idx[k], i)
		lc := c
		lc.Links, lc.Policies = nil, nil
		if c.Outcome == Done {
			for _, l := range c.Links {
				if s := f.ShardOf(l.Host); s == k {
					lc.Links = append(lc.Links, l)
				} else {
					remote[s] = append(remote[s], l)
				}
			}
		}
		for h, p := range c.Policies {
			s := f.ShardOf(h)
			if s == k {
				if lc.Policies == nil {
					lc.Policies = map[string]HostPolicy{}
				}
				lc.Policies[h] = p
			} else {
				if remotePol[s] == nil {
					remotePol[s] = map[string]HostPolicy{}
				}
				remotePol[s][h] = p
			}
		}
		local[i] = lc
	}
	return idx, local, remote, remotePol, nil
}

// sendRemote enqueues links on the shards they belong to, one call per
// shard (per seedBatch links): the first step of a sharded completion.
func (f *Redis) sendRemote(ctx context.Context, slave string, remote map[int][]Task, remotePol map[int]map[string]HostPolicy) error {
	for _, s := range sortedShards(remote) {
		if err := f.shards[s].enqueueLinks(ctx, slave, remote[s], remotePol[s]); err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		f.woke(s)
	}
	return nil
}

// completeLocal completes each shard's completions (split), the home
// shard's last with the claim when max > 0.
func (f *Redis) completeLocal(ctx context.Context, slave string, idx map[int][]int, local []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	acked := make([]bool, len(local))
	sub := func(k int) []Completion {
		out := make([]Completion, len(idx[k]))
		for j, i := range idx[k] {
			out[j] = local[i]
		}
		return out
	}
	for _, k := range sortedShards(idx) {
		if k == f.home && max > 0 {
			continue
		}
		a, err := f.shards[k].Complete(ctx, slave, sub(k))
		if err != nil {
			return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			acked[i] = a[j]
		}
	}
	if max <= 0 {
		return acked, ClaimResult{}, nil
	}
	a, res, err := f.shards[f.home].CompleteClaim(ctx, slave, sub(f.home), max, opts)
	if err != nil {
		return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", f.home, err)
	}
	for j, i := range idx[f.home] {
		acked[i] = a[j]
	}
	res, err = f.claimSharded(ctx, slave, max, opts, &res)
	return acked, res, err
}

// enqueueLinks calls the library's function links (seed.lua), which
// enqueues links found on a page of another shard as complete does with a
// page's links, for links of this shard's hosts, in
// batches; links the link cache knows are left out, and the ones sent are
// remembered once the call succeeded.
func (f *shard) enqueueLinks(ctx context.Context, slave string, links []Task, policies map[string]HostPolicy) error {
	var fps []uint64
	if f.links != nil {
		links, fps = f.unknownLinks(links)
	}
	if len(links) == 0 && len(policies) == 0 {
		return nil
	}
	for from := 0; from < len(links) || from == 0; from += seedBatch {
		to := min(from+seedBatch, len(links))
		var pol map[string]HostPolicy
		if from == 0 {
			pol = policies
		}
		args := []any{slave, len(pol), to - from}
		args = appendPolicies(args, pol)
		var batchFPs []uint64
		if fps != nil {
			batchFPs = fps[from:to]
		}
		args = f.appendTuplesFP(args, links[from:to], batchFPs)
		if _, err := f.call(ctx, "links", args...); err != nil {
			return wrap("enqueue links", err)
		}
		for _, fp := range batchFPs {
			f.links.add(fp)
		}
		if to >= len(links) {
			break
		}
	}
	return nil
}

// Extend implements Frontier.
func (f *Redis) Extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	if len(f.shards) == 1 {
		return f.shard.Extend(ctx, slave, leases)
	}
	idx := map[int][]int{}
	for i, l := range leases {
		if l.Shard < 0 || l.Shard >= len(f.shards) {
			return nil, fmt.Errorf("extend %s: lease of shard %d, the crawl has %d", l.URL, l.Shard, len(f.shards))
		}
		idx[l.Shard] = append(idx[l.Shard], i)
	}
	held := make([]bool, len(leases))
	for _, k := range sortedShards(idx) {
		sub := make([]Lease, len(idx[k]))
		for j, i := range idx[k] {
			sub[j] = leases[i]
		}
		h, err := f.shards[k].Extend(ctx, slave, sub)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			held[i] = h[j]
		}
	}
	return held, nil
}

// Leave implements Registry: the slave gives back its leases on every
// shard; shard 0 records the leave.
func (f *Redis) Leave(ctx context.Context, slave, detail string) error {
	for k := len(f.shards) - 1; k >= 0; k-- {
		if err := f.shards[k].leave(ctx, slave, detail, k == 0); err != nil {
			return err
		}
	}
	return nil
}

// RecoverSlave implements Supervisor: the slave's leases on every shard
// are taken back; shard 0 records its death.
func (f *Redis) RecoverSlave(ctx context.Context, slave string) (int, error) {
	return f.retireAll(ctx, slave, "death", "heartbeats missed")
}

// RetireGone drops a slave that left from every shard's registry (see
// shard.RetireGone).
func (f *Redis) RetireGone(ctx context.Context, slave string) (int, error) {
	return f.retireAll(ctx, slave, "gone", "heartbeats missed")
}

func (f *Redis) retireAll(ctx context.Context, slave, kind, detail string) (int, error) {
	total := 0
	for k := len(f.shards) - 1; k >= 0; k-- {
		n, err := f.shards[k].retire(ctx, slave, kind, detail, k == 0)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// RecoverExpired implements Supervisor over every shard.
func (f *Redis) RecoverExpired(ctx context.Context, limit int) (int, error) {
	return f.RecoverExpiredShards(ctx, limit, nil)
}

// RecoverExpiredShards is RecoverExpired on the shards given (nil: all),
// the ones a master owns.
func (f *Redis) RecoverExpiredShards(ctx context.Context, limit int, shards []int) (int, error) {
	if shards == nil {
		shards = f.all()
	}
	total := 0
	for _, k := range shards {
		n, err := f.shards[k].RecoverExpired(ctx, limit)
		total += n
		if n > 0 {
			f.woke(k)
		}
		if err != nil {
			return total, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return total, nil
}

func (f *Redis) all() []int {
	out := make([]int, len(f.shards))
	for k := range out {
		out[k] = k
	}
	return out
}

// Pause implements the admin's pause on every shard.
func (f *Redis) Pause(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.Pause(ctx) })
}

// Resume undoes Pause on every shard.
func (f *Redis) Resume(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.Resume(ctx) })
}

// Drain asks a slave to drain, on every shard.
func (f *Redis) Drain(ctx context.Context, slave string) (bool, error) {
	ok, err := f.shard.Drain(ctx, slave)
	if err != nil || !ok || len(f.shards) == 1 {
		return ok, err
	}
	for k, s := range f.shards[1:] {
		if err := s.rdb.HSet(ctx, s.keys.Control, ctlDrain+slave, time.Now().UnixMilli()).Err(); err != nil {
			return true, wrap(fmt.Sprintf("drain on shard %d", k+1), err)
		}
	}
	return true, nil
}

// RetireProxy retires a proxy on every shard's control hash.
func (f *Redis) RetireProxy(ctx context.Context, proxy string) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.RetireProxy(ctx, proxy) })
}

// eachShard runs fn on every shard, shard 0 last; its result is shard 0's.
func eachShard(f *Redis, fn func(*shard) (bool, error)) (bool, error) {
	for k := len(f.shards) - 1; k > 0; k-- {
		if _, err := fn(f.shards[k]); err != nil {
			return false, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return fn(f.shards[0])
}

// PutRules publishes a rule set to every shard (a claim returns its
// shard's version), shard 0 last: its channel tells the slaves.
func (f *Redis) PutRules(ctx context.Context, version string, blob []byte) error {
	if err := checkRulesVersion(version); err != nil {
		return err // before any shard has it
	}
	for k := len(f.shards) - 1; k > 0; k-- {
		s := f.shards[k]
		if err := s.rdb.HSet(ctx, s.keys.Rules, "version", version, "blob", blob).Err(); err != nil {
			return wrap(fmt.Sprintf("put rules on shard %d", k), err)
		}
	}
	return f.shard.PutRules(ctx, version, blob)
}

// GetRobots implements the robots.txt store on the host's shard.
func (f *Redis) GetRobots(ctx context.Context, host string) (RobotsRecord, bool, error) {
	return f.hostShard(host).GetRobots(ctx, host)
}

// PutRobots stores a robots.txt record on the host's shard.
func (f *Redis) PutRobots(ctx context.Context, host string, r RobotsRecord) error {
	return f.hostShard(host).PutRobots(ctx, host, r)
}

// PutRobotsTTL is PutRobots with a TTL.
func (f *Redis) PutRobotsTTL(ctx context.Context, host string, r RobotsRecord, ttl time.Duration) error {
	return f.hostShard(host).PutRobotsTTL(ctx, host, r, ttl)
}

// Stats implements Supervisor.
func (f *Redis) Stats(ctx context.Context) (Stats, error) {
	s, err := f.Snapshot(ctx)
	return s.Stats, err
}

// Snapshot reads the crawl's counters, clock, slaves and admin state: shard
// 0's, with the other shards' counters added and each shard's queues in
// Stats.Shards.
func (f *Redis) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := f.shard.Snapshot(ctx)
	if err != nil || len(f.shards) == 1 {
		return snap, err
	}
	part := func(k int, s Stats) ShardStats {
		return ShardStats{Shard: k, Slot: hashslot.Of(f.shards[k].keys.Meta), Queued: s.Queued, InFlight: s.InFlight, Retry: s.Retry, Done: s.Done, Seen: s.Seen, Hosts: s.Hosts}
	}
	st := &snap.Stats
	st.Shards = []ShardStats{part(0, *st)}
	for k, s := range f.shards[1:] {
		o, err := s.Stats(ctx) // this shard's alone
		if err != nil {
			return snap, fmt.Errorf("shard %d: %w", k+1, err)
		}
		st.Shards = append(st.Shards, part(k+1, o))
		st.Queued += o.Queued
		st.InFlight += o.InFlight
		st.Retry += o.Retry
		if o.NextRetryAt > 0 && (st.NextRetryAt == 0 || o.NextRetryAt < st.NextRetryAt) {
			st.NextRetryAt = o.NextRetryAt
		}
		st.Done += o.Done
		st.Failed += o.Failed
		st.Seen += o.Seen
		st.Lost += o.Lost
		st.Retried += o.Retried
		st.Duplicates += o.Duplicates
		st.TrapDropped += o.TrapDropped
		st.Hosts += o.Hosts
		st.RenderQueued += o.RenderQueued
		st.Requeued += o.Requeued
		st.Reseeded += o.Reseeded
	}
	return snap, nil
}

// CheckFinished implements Supervisor. With several shards it is a double
// collect: every shard's (idle, work counter) is read, then read again; the
// crawl is idle at the moment between the two reads when every shard was
// idle both times and no counter moved (work added anywhere bumps its
// shard's counter, and a link in transit holds its page's lease, so its
// source shard is not idle). It is finished after staying idle, with the
// same counters, for the quiescence window.
func (f *Redis) CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	st, err := f.FinishCheck(ctx, quiescence)
	return st == Finished, err
}

// FinishCheck is CheckFinished that also tells a busy crawl from one in
// its quiescence window (shard.FinishCheck).
func (f *Redis) FinishCheck(ctx context.Context, quiescence time.Duration) (FinishState, error) {
	if len(f.shards) == 1 {
		return f.shard.FinishCheck(ctx, quiescence)
	}
	collect := func() (bool, string, error) {
		idle, sig := true, ""
		for k, s := range f.shards {
			i, seq, err := s.idle(ctx)
			if err != nil {
				return false, "", fmt.Errorf("check finished: shard %d: %w", k, err)
			}
			idle = idle && i
			sig += strconv.FormatInt(seq, 10) + ","
		}
		return idle, sig, nil
	}
	idle1, sig1, err := collect()
	if err != nil {
		return Busy, err
	}
	idle, sig := false, ""
	if idle1 {
		idle2, sig2, err := collect()
		if err != nil {
			return Busy, err
		}
		idle, sig = idle2 && sig2 == sig1, sig2
	}
	n, err := f.callInt(ctx, "finish_sharded", boolArg(idle), sig, ms(quiescence))
	if err != nil {
		return Busy, wrap("check finished", err)
	}
	return FinishState(n), nil
}

// idle reads whether a shard has nothing queued, in flight or waiting for
// retry, and its work counter (the library's function idle: finish.lua).
func (f *shard) idle(ctx context.Context) (bool, int64, error) {
	arr, err := f.callSlice(ctx, "idle")
	if err != nil {
		return false, 0, wrap("idle", err)
	}
	if len(arr) != 2 {
		return false, 0, fmt.Errorf("idle: %d values", len(arr))
	}
	i, _ := toInt(arr[0])
	seq, _ := toInt(arr[1])
	return i == 1, seq, nil
}
