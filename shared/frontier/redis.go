package frontier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Options configure a Redis frontier. Every process of a crawl must use the
// same values; they come from the shared config file.
type Options struct {
	Crawl           string
	Delay           time.Duration // politeness delay between request starts to one host
	Jitter          float64       // extra random delay, fraction of Delay
	HostConcurrency int           // requests in flight to one host across all slaves
	LeaseDuration   time.Duration
	MaxAttempts     int
	// ScopeBySeeds restricts links to the seeds' hosts (allow_hosts empty).
	ScopeBySeeds bool
	// ExpectedURLs sizes the seen-URL buckets when the crawl is created.
	ExpectedURLs int64
	// DeadAfter is how old a heartbeat may be for a slave to count as alive.
	DeadAfter time.Duration
}

// OptionsFromConfig derives frontier options from the config.
func OptionsFromConfig(c *config.Config) Options {
	return Options{
		Crawl:           c.Crawl.Name,
		Delay:           c.Politeness.Delay,
		Jitter:          c.Politeness.Jitter,
		HostConcurrency: c.Politeness.HostConcurrency,
		LeaseDuration:   c.Lease.Duration,
		MaxAttempts:     c.Lease.MaxAttempts,
		ScopeBySeeds:    len(c.Crawl.AllowHosts) == 0,
		ExpectedURLs:    c.Dedup.ExpectedURLs,
		DeadAfter:       c.Master.DeadAfter,
	}
}

// Redis is the Redis implementation of Frontier, Seeder, Supervisor and
// Registry.
type Redis struct {
	rdb      redis.UniversalClient
	opt      Options
	keys     Keys
	allKeys  []string // keys.all(), passed as KEYS to every script
	seenBits uint     // number of bucket bits, fixed per crawl in meta
}

var (
	_ Frontier   = (*Redis)(nil)
	_ Seeder     = (*Redis)(nil)
	_ Supervisor = (*Redis)(nil)
	_ Registry   = (*Redis)(nil)
)

// bucketBits sizes the seen buckets for about 64 fingerprints each at the
// expected count, well inside Redis's listpack limit (128 entries by
// default), so each fingerprint costs about 10 bytes.
func bucketBits(expected int64) uint {
	if expected < 1 {
		expected = 1
	}
	b := uint(bits.Len64(uint64(expected/64 + 1)))
	return min(max(b, 8), 24)
}

// NewRedis opens a crawl's frontier. The crawl's bucket layout is fixed the
// first time any process opens it; later processes read it from Redis.
func NewRedis(ctx context.Context, rdb redis.UniversalClient, opt Options) (*Redis, error) {
	if opt.Crawl == "" {
		return nil, errors.New("new frontier: empty crawl name")
	}
	if opt.HostConcurrency < 1 {
		opt.HostConcurrency = 1
	}
	if opt.MaxAttempts < 1 {
		opt.MaxAttempts = 1
	}
	if opt.LeaseDuration <= 0 {
		opt.LeaseDuration = time.Minute
	}
	if opt.DeadAfter <= 0 {
		opt.DeadAfter = 10 * time.Second
	}
	keys := NewKeys(opt.Crawl)
	f := &Redis{rdb: rdb, opt: opt, keys: keys, allKeys: keys.all()}
	want := bucketBits(opt.ExpectedURLs)
	if err := rdb.HSetNX(ctx, f.keys.Meta, "seen_bits", want).Err(); err != nil {
		return nil, wrap("new frontier", err)
	}
	got, err := rdb.HGet(ctx, f.keys.Meta, "seen_bits").Int()
	if err != nil {
		return nil, wrap("new frontier", err)
	}
	if got < 8 || got > 24 {
		return nil, fmt.Errorf("new frontier: crawl %q has invalid seen_bits %d", opt.Crawl, got)
	}
	f.seenBits = uint(got)
	return f, nil
}

// Keys returns the crawl's keys.
func (f *Redis) Keys() Keys { return f.keys }

// Client returns the Redis client.
func (f *Redis) Client() redis.UniversalClient { return f.rdb }

// Fingerprint is the 64-bit fingerprint of a canonical URL: the first 8
// bytes of its SHA-256. It is stored in Redis, so it never changes.
func Fingerprint(canonical string) uint64 { return urlx.Fingerprint(canonical) }

// seenSlot returns the bucket and field of a URL: the top bits pick the
// bucket and the remaining bits, packed big-endian, are the field. Bucket
// and field together keep all 64 bits.
func (f *Redis) seenSlot(url string) (string, string) {
	fp := Fingerprint(url)
	b := f.seenBits
	bucket := fp >> (64 - b)
	rest := fp << b >> b // low 64-b bits
	n := int(64-b+7) / 8
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], rest)
	return strconv.FormatUint(bucket, 16), string(buf[8-n:])
}

func encodeTask(t Task) string {
	return strconv.Itoa(t.Depth) + "\t" + strconv.Itoa(t.Hops) + "\t" + strconv.Itoa(t.Attempt) + "\t" + t.URL
}

// task tuples (links and seeds) are passed to scripts as 6 ARGV each.
const tupleLen = 6

func (f *Redis) appendTuples(args []any, ts []Task) []any {
	for _, t := range ts {
		b, fld := f.seenSlot(t.URL)
		args = append(args, b, fld, t.Host, t.ScopeHost, t.Priority, encodeTask(t))
	}
	return args
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func seed() int64 { return rand.Int64N(math.MaxInt32) }

// run executes a script with the crawl's fixed keys.
func (f *Redis) run(ctx context.Context, s *redis.Script, args ...any) (any, error) {
	return s.Run(ctx, f.rdb, f.allKeys, append([]any{f.keys.Prefix}, args...)...).Result()
}

// wrap adds the operation and marks connection failures ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isUnavailable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s := err.Error()
	for _, p := range []string{"connection refused", "i/o timeout", "EOF", "LOADING", "broken pipe", "connection reset", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func parseTask(host string, prio int64, task string) (Task, error) {
	t := Task{Host: host, Priority: prio}
	parts := strings.SplitN(task, "\t", 4)
	if len(parts) != 4 {
		return t, fmt.Errorf("malformed task %q", task)
	}
	var err1, err2, err3 error
	t.Depth, err1 = strconv.Atoi(parts[0])
	t.Hops, err2 = strconv.Atoi(parts[1])
	t.Attempt, err3 = strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return t, fmt.Errorf("malformed task %q: %w", task, err)
	}
	t.URL = parts[3]
	return t, nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T %v", v, v)
}
