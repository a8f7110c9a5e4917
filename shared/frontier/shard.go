package frontier

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/urlx"
)

// shard is one complete frontier under one hash tag: the whole crawl when
// it has one shard, else the hosts that hash to it (Redis, sharded.go).
type shard struct {
	rdb         redis.UniversalClient
	opt         Options
	keys        Keys
	allKeys     []string   // keys.all(), passed as KEYS to every function
	contentBits uint       // number of content bucket bits, per crawl in meta
	bloom       bloomSize  // the Bloom filter's size, fixed per crawl in meta (bloom mode)
	links       *linkCache // nil: every link goes to the function (linkcache.go)
	// libFor, when set, picks the library a function is called from (the
	// section profile's instrumented copy: ProfileScripts in
	// export_test.go); nil in production
	libFor func(name string) *library
	// differ names the settings in which this slave's options differ from
	// the crawl's (the master's), which the functions use
	differ []string
	// index is the shard's number, tag what its event ids carry ("" for
	// shard 0, "~k" for shard k of a sharded crawl: stream.go)
	index int
	tag   string
	// wait is the crawl's waiting for replicas (durable.go); nil: none
	wait *replicaWait
	// contentKey keys the slots of scoped content hashes
	// (Completion.ContentScope: scopedContent), random per process
	contentKey [32]byte
	contentMAC sync.Pool // of hash.Hash: HMAC-SHA-256 keyed by contentKey (scopedContent)
}

// Exact dedup's seen buckets grow by linear hashing (luaPrelude: LH): a
// crawl starts with 2^seenFloor buckets per shard and splits one each time
// its count passes seenLoad per bucket, so its buckets hold seenLoad to
// 2·seenLoad URLs on average and a small crawl pays what a big one does per
// URL. A bucket is a set of integers (the fingerprint's top 56 bits),
// intset-encoded up to Redis's set-max-intset-entries (512 by default) at
// 8 bytes a member: seenLoad keeps the fullest buckets below that. Buckets
// stop splitting at level seenMaxLevel (2^23 buckets, about 1.6 billion
// URLs in a shard); past that they grow and leave their intset.
//
// Content buckets (Completion.ContentHash) have a fixed count, 2^contentBits
// per shard whatever the crawl's expected size: an entry holds a URL, so a
// bucket's own cost matters little, and beyond listpack size (128 entries,
// or any URL over 64 bytes: most) a bucket is a hash table whose lookups
// do not grow with it. Growing them as seen buckets grow would cost every
// page about 1.4 µs more of Redis time (their splits move URLs).
const (
	seenLoad     = 192
	seenFloor    = 8
	seenMaxLevel = 23
	contentBits  = 12
)

// newShard opens one shard of a crawl under keys; opt is normalized, and
// want is the Bloom filter's size for a new crawl (bloom mode).
func newShard(ctx context.Context, rdb redis.UniversalClient, opt Options, keys Keys, want bloomSize) (*shard, error) {
	f := &shard{rdb: rdb, opt: opt, keys: keys, allKeys: keys.all()}
	crand.Read(f.contentKey[:]) // never fails
	if opt.Strategy == "" || opt.Strategy == StrategyBFS || opt.Strategy == StrategyDFS {
		f.links = newLinkCache(opt.LinkCache)
	}
	res, err := f.callSlice(ctx, "init", opt.Strategy, opt.DedupMode, want.M, want.K, want.Seg, contentBits, keyLayout)
	if err != nil || len(res) != 8 {
		return nil, wrap("new frontier", cmpErr(err, fmt.Errorf("init returned %d values", len(res))))
	}
	str := func(v any) string { s, _ := v.(string); return s }
	if err := checkLayout(opt.Crawl, str(res[0])); err != nil {
		return nil, err
	}
	if str(res[1]) != opt.Strategy {
		return nil, fmt.Errorf("new frontier: crawl %q was created with strategy %s, not %s", opt.Crawl, str(res[1]), opt.Strategy)
	}
	if str(res[2]) != opt.DedupMode {
		return nil, fmt.Errorf("new frontier: crawl %q was created with dedup mode %s, not %s", opt.Crawl, str(res[2]), opt.DedupMode)
	}
	cb, err := strconv.Atoi(str(res[6]))
	if err != nil || cb < 1 || cb > 24 {
		return nil, fmt.Errorf("new frontier: crawl %q has invalid content_bits %q", opt.Crawl, str(res[6]))
	}
	f.contentBits = uint(cb)
	load := cmp.Or(opt.seenLoad, seenLoad)
	if opt.DedupMode == DedupBloom {
		if f.bloom, err = parseBloomSize(str(res[3]), str(res[4]), str(res[5])); err != nil {
			return nil, fmt.Errorf("new frontier: crawl %q: %w", opt.Crawl, err)
		}
		if created, _ := toInt(res[7]); created == 1 {
			if err := f.allocBloom(ctx); err != nil {
				return nil, wrap("new frontier: allocate bloom filter", err)
			}
		}
	}
	if f.differ, err = f.putSettings(ctx, f.settings(load)); err != nil {
		return nil, fmt.Errorf("new frontier: %w", err)
	}
	return f, nil
}

func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// pq reports whether the strategy keeps importance-ordered queues.
func (f *shard) pq() bool {
	return f.opt.Strategy == StrategyPriority || f.opt.Strategy == StrategyAOPIC
}

// Fingerprint is the 64-bit fingerprint of a canonical URL: the first 8
// bytes of its SHA-256. It is stored in Redis, so it never changes.
func Fingerprint(canonical string) uint64 { return urlx.Fingerprint(canonical) }

// seenSlot returns a URL's tuple bucket and field (slot).
func (f *shard) seenSlot(url string) (string, string) {
	return f.slot(Fingerprint(url))
}

// slot returns a URL fingerprint's tuple bucket and field: the low 32
// bits, from which the scripts pick the growing bucket (LH.bucket_key),
// and the top 56 bits, the bucket's member, both in decimal. Bucket and
// field together keep all 64 bits.
func (f *shard) slot(fp uint64) (string, string) {
	return strconv.FormatUint(fp&math.MaxUint32, 10), strconv.FormatUint(fp>>8, 10)
}

// contentSlot returns a content hash's bucket and field (fixedSlot with
// the crawl's contentBits).
func (f *shard) contentSlot(fp uint64) (string, string) { return fixedSlot(fp, f.contentBits) }

// fixedSlot splits a 64-bit fingerprint into a bucket of a fixed layout of
// b bits and a field: the top b bits pick the bucket (hex) and the
// remaining bits, packed big-endian, are the field.
func fixedSlot(fp uint64, b uint) (string, string) {
	bucket := fp >> (64 - b)
	rest := fp << b >> b // low 64-b bits
	n := int(64-b+7) / 8
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], rest)
	return strconv.FormatUint(bucket, 16), string(buf[8-n:])
}

// encodeTask returns a task string (keys.go): depth \t hops \t attempt \t
// url. The depth field carries the task's marks:
//
//	[r][s<level>[x]:]<depth>[@<lastmod>]
//
// "r" first for a render task (the scripts' is_render reads only that
// byte), "s<level>:" for a sitemap task ("x" when SitemapAnyHost), and
// "@<unix seconds>" for a sitemap's lastmod. The scripts copy the field
// as it is; only parseTask reads it.
func encodeTask(t Task) string {
	var b strings.Builder
	b.Grow(len(t.URL) + 24)
	if t.Render {
		b.WriteByte('r')
	}
	if t.Sitemap > 0 {
		b.WriteByte('s')
		b.WriteString(strconv.Itoa(t.Sitemap))
		if t.SitemapAnyHost {
			b.WriteByte('x')
		}
		b.WriteByte(':')
	}
	b.WriteString(strconv.Itoa(t.Depth))
	if t.LastMod != 0 {
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(t.LastMod, 10))
	}
	b.WriteByte('\t')
	b.WriteString(strconv.Itoa(t.Hops))
	b.WriteByte('\t')
	b.WriteString(strconv.Itoa(t.Attempt))
	b.WriteByte('\t')
	b.WriteString(t.URL)
	return b.String()
}

// parseDepthField reads encodeTask's depth field into t.
func parseDepthField(f string, t *Task) error {
	f, t.Render = strings.CutPrefix(f, "r")
	if rest, ok := strings.CutPrefix(f, "s"); ok {
		mark, after, found := strings.Cut(rest, ":")
		if !found {
			return errors.New("sitemap mark without ':'")
		}
		mark, t.SitemapAnyHost = strings.CutSuffix(mark, "x")
		level, err := strconv.Atoi(mark)
		if err != nil || level <= 0 {
			return fmt.Errorf("sitemap level %q", mark)
		}
		t.Sitemap, f = level, after
	}
	if depth, lm, ok := strings.Cut(f, "@"); ok {
		v, err := strconv.ParseInt(lm, 10, 64)
		if err != nil {
			return fmt.Errorf("lastmod: %w", err)
		}
		t.LastMod, f = v, depth
	}
	d, err := strconv.Atoi(f)
	t.Depth = d
	return err
}

// task tuples (links and seeds) are passed to functions as tupleLen ARGV
// each: bucket, field, host, scope_host, prio, task, qvar. In bloom mode
// bucket and field are the decimal a = h1 mod m and b = 1 + h2 mod (m-1)
// of the URL's Bloom positions (bloom.go).
const tupleLen = 7

func (f *shard) appendTuples(args []any, ts []Task) []any {
	return f.appendTuplesFP(args, ts, nil)
}

// appendTuplesFP is appendTuples with the tasks' fingerprints already
// computed (fps[i] for ts[i]; nil: computed here).
func (f *shard) appendTuplesFP(args []any, ts []Task, fps []uint64) []any {
	for i, t := range ts {
		var b, fld string
		switch {
		case f.bloom.M > 0:
			b, fld = f.bloom.args(t.URL)
		case fps != nil:
			b, fld = f.slot(fps[i])
		default:
			b, fld = f.seenSlot(t.URL)
		}
		qv := ""
		date := t.DateQuery && f.opt.MaxDateVariants > 0
		if t.PathKey != "" && (date || f.opt.MaxQueryVariants > 0) {
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], Fingerprint(t.PathKey))
			qv = string(buf[:])
			if date {
				// its own cap, the crawl's MaxDateVariants: 8 bytes and "d"
				// (admit in queue.lua)
				qv += "d"
			}
		}
		args = append(args, b, fld, t.Host, t.ScopeHost, f.prio(t), encodeTask(t), qv)
	}
	return args
}

// prio is a new task's prio ARGV: the list priority with bfs (Priority)
// and dfs (-Depth), the pq score -importance with priority (X·1 + Y·Score:
// found once) and aopic (cash 1, a seed's; a link's cash is set by the
// complete script).
func (f *shard) prio(t Task) string {
	switch f.opt.Strategy {
	case StrategyDFS:
		return strconv.Itoa(-t.Depth)
	case StrategyPriority:
		return fmtFloat(-(f.opt.PriorityX + f.opt.PriorityY*t.Score))
	case StrategyAOPIC:
		return "-1"
	}
	return strconv.FormatInt(t.Priority, 10)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func seed() int64 { return rand.Int64N(math.MaxInt32) }

// callSlice is call for a function that returns an array.
func (f *shard) callSlice(ctx context.Context, name string, args ...any) ([]any, error) {
	res, err := f.call(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("%s returned %T, not an array", name, res)
	}
	return arr, nil
}

// callInt is call for a function that returns an integer.
func (f *shard) callInt(ctx context.Context, name string, args ...any) (int64, error) {
	res, err := f.call(ctx, name, args...)
	if err != nil {
		return 0, err
	}
	return toInt(res)
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
	for _, p := range []string{"connection refused", "i/o timeout", "EOF", "LOADING", "broken pipe", "connection reset", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "NOREPLICAS", "connection pool timeout"} {
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
	var err2, err3 error
	err1 := parseDepthField(parts[0], &t)
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

// keyLayout is the key layout of the crawls this version makes (meta
// layout). There is one; a crawl made by an earlier development version
// has none and is refused rather than converted.
const keyLayout = "1"

// checkLayout refuses a crawl whose meta names another key layout than
// keyLayout, saying the way out.
func checkLayout(crawl, have string) error {
	if have == keyLayout {
		return nil
	}
	if have == "" {
		have = "none"
	}
	return fmt.Errorf("new frontier: crawl %q was made by an older redcrawl (key layout %s, this version reads %s): "+
		"remove it with `master drop --crawl %s` or crawl under a new --crawl name", crawl, have, keyLayout, crawl)
}
