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
// rules (likewise) and the finish marks.
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
// Registry: a crawl, over one shard or several. Every method of it is a
// crawl-wide operation written out over its shards (shard 0 holds what
// is crawl-wide); a shard's methods act on that shard alone.
type Redis struct {
	opt    Options // the crawl's options as normalized (ExpectedURLs of the whole crawl)
	shards []*shard
	home   int // the shard this slave prefers (Options.Slave)
	// quiet[c][k]: claims of class c (0 static, 1 with render tasks) skip
	// shard k for a while after it had nothing to lease (claimSharded)
	quiet [2][]quietMark
	// lim is what this process knows of the crawl's limits (limits.go)
	lim limitState
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
	f := &Redis{opt: opt, shards: make([]*shard, n)}
	wait := newReplicaWait(opt)
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
		s.index, s.wait = k, wait
		if k > 0 {
			s.tag = "~" + strconv.Itoa(k)
		}
		f.shards[k] = s
	}
	if wait != nil {
		// each shard's node's replicas, counted now: a process whose
		// first look at a node came while its replica was cut off would
		// take it for one without any, and not wait (durable.go)
		for _, s := range f.shards {
			if _, _, err := s.node(ctx); err != nil {
				return nil, fmt.Errorf("new frontier: %w", wrap("count replicas", err))
			}
		}
	}
	if opt.Slave != "" {
		f.home = JumpHash(hashString(opt.Slave), n)
	}
	if err := f.readLimited(ctx); err != nil {
		return nil, fmt.Errorf("new frontier: %w", err)
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
	res, err := s.callSlice(ctx, "shard_count", min(want, maxShards), strings.Join(place, ","), keyLayout)
	if err != nil || len(res) != 3 {
		return 0, nil, wrap("new frontier: shard count", cmpErr(err, fmt.Errorf("%d values", len(res))))
	}
	layout, _ := res[2].(string)
	if err := checkLayout(opt.Crawl, layout); err != nil {
		return 0, nil, err
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

// KnownLink reports whether this process's link cache (Options.LinkCache,
// bfs and dfs only) holds url: a link that a completion it sent already
// put through the seen set, which a completion would leave out of its
// call. The cache keys canonical URLs, so a URL it holds is canonical: the
// work API uses this to leave out a slave's links found again without
// planning them (master/workapi). False without a cache.
func (f *Redis) KnownLink(url string) bool {
	if f.shards[0].links == nil {
		return false
	}
	fp := Fingerprint(url)
	for _, s := range f.shards {
		if s.links.has(fp) {
			return true
		}
	}
	return false
}

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

var (
	_ Frontier   = (*Redis)(nil)
	_ Seeder     = (*Redis)(nil)
	_ Supervisor = (*Redis)(nil)
	_ Registry   = (*Redis)(nil)

	_ PolicySeeder = (*Redis)(nil)
	_ RulesStore   = (*Redis)(nil)
)

// Keys returns the crawl's keys.
func (r *Redis) Keys() Keys { return r.shards[0].keys }

// Client returns the Redis client.
func (r *Redis) Client() redis.UniversalClient { return r.shards[0].rdb }
