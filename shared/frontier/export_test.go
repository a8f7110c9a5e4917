package frontier

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// Test hooks: read the seen structures without adding to them.

// BloomSize returns the crawl's Bloom filter size (all 0 in exact mode).
func (f *Redis) BloomSize() (m uint64, k int, seg uint64) {
	return f.shards[0].bloom.M, f.shards[0].bloom.K, f.shards[0].bloom.Seg
}

// BloomPositions returns a URL's k bit positions as Go computes them.
func (f *Redis) BloomPositions(url string) []uint64 { return f.shards[0].bloom.positions(url) }

// NewBloomSize exposes the sizing formula.
func NewBloomSize(n int64, p float64) (m uint64, k int, err error) {
	b, err := newBloomSize(n, p)
	return b.M, b.K, err
}

// BloomSegBits is the segment size of new crawls.
const BloomSegBits = bloomSegBits

// MaybeSeen reports for each URL whether the crawl takes it for seen
// (shard 0's seen set: see MaybeSeenTasks for a sharded crawl).
func (f *Redis) MaybeSeen(ctx context.Context, urls []string) ([]bool, error) {
	return f.shards[0].maybeSeen(ctx, urls)
}

// MaybeSeenTasks is MaybeSeen in the seen set of each task's shard (its
// Host's).
func (f *Redis) MaybeSeenTasks(ctx context.Context, tasks []Task) ([]bool, error) {
	out := make([]bool, len(tasks))
	for k, ts := range f.byShard(tasks) {
		urls := make([]string, len(ts))
		for i, t := range ts {
			urls[i] = t.URL
		}
		has, err := f.shards[k].maybeSeen(ctx, urls)
		if err != nil {
			return nil, err
		}
		byURL := make(map[string]bool, len(urls))
		for i, u := range urls {
			byURL[u] = has[i]
		}
		for i, t := range tasks {
			if f.ShardOf(t.Host) == k {
				out[i] = byURL[t.URL]
			}
		}
	}
	return out, nil
}

func (f *shard) maybeSeen(ctx context.Context, urls []string) ([]bool, error) {
	out := make([]bool, 0, len(urls))
	for len(urls) > 0 {
		n := min(len(urls), 1000)
		args := []any{n}
		for _, u := range urls[:n] {
			var x, y string
			if f.bloom.M > 0 {
				x, y = f.bloom.args(u)
			} else {
				x, y = f.seenSlot(u)
			}
			args = append(args, x, y)
		}
		arr, err := f.callSlice(ctx, "seen_has", args...)
		if err != nil {
			return nil, err
		}
		if len(arr) != n {
			return nil, fmt.Errorf("seen check returned %d values for %d", len(arr), n)
		}
		for _, v := range arr {
			i, _ := toInt(v)
			out = append(out, i == 1)
		}
		urls = urls[n:]
	}
	return out, nil
}

// WithSeenLoad sets the mean members per seen bucket at which a crawl
// that opt creates splits one (a quarter of it for content buckets), so a
// test grows a crawl through many splits with few URLs.
func WithSeenLoad(opt Options, load int) Options {
	opt.seenLoad = load
	return opt
}

// MemberBits returns, for each level b that splits, the fingerprint's bit
// b as the scripts read it from its seen bucket member when they split a
// bucket.
func (f *Redis) MemberBits(ctx context.Context, fp uint64) ([]int64, error) {
	_, member := f.shards[0].slot(fp)
	var out []int64
	for b := seenFloor; b < seenMaxLevel; b++ {
		v, err := f.shards[0].callInt(ctx, "member_bit", member, b-seenFloor)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ContentBits is the content bucket bits of a new crawl.
const ContentBits = contentBits

// SeenFloor and SeenMaxLevel are the levels at which buckets start and
// from which they stop splitting.
const (
	SeenFloor    = seenFloor
	SeenMaxLevel = seenMaxLevel
)

// EventID exposes the event-id numbering of stream entries.
var EventID = eventID

// The section profile: an instrumented copy of the library, whose claim,
// complete and complete_claim the frontier calls instead of the library's,
// with each --[[mark:name]] marker of its source replaced by a call that
// adds the µs since the previous marker (Redis TIME) to section name,
// written at the end of the call (--[[profile:flush]], in finish) to the
// list at the crawl prefix + "profile": lines "name us n".

var (
	markRe   = regexp.MustCompile(`--\[\[mark:(\w+)\]\]`)
	profDecl = `local prof_us, prof_n, prof_last = {}, {}, nil
local function mark(name)
  local t = redis.call('TIME')
  local u = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if prof_last then
    prof_us[name] = (prof_us[name] or 0) + (u - prof_last)
    prof_n[name] = (prof_n[name] or 0) + 1
  end
  prof_last = u
end`
	profStart = `prof_last = nil
mark('')`
	profFlush = `local prof_out = {}
for k, v in pairs(prof_us) do prof_out[#prof_out + 1] = k .. ' ' .. v .. ' ' .. prof_n[k] end
if #prof_out > 0 then redis.call('RPUSH', P .. 'profile', table.concat(prof_out, '\n')) end
prof_us, prof_n = {}, {}`
)

// profiled instruments the library's source.
func profiled(src string) string {
	for _, m := range []string{"--[[profile:decl]]", "--[[profile:start]]", "--[[profile:flush]]"} {
		if !strings.Contains(src, m) {
			panic("profiled: source without " + m)
		}
	}
	src = strings.Replace(src, "--[[profile:decl]]", profDecl, 1)
	src = strings.Replace(src, "--[[profile:start]]", profStart, 1)
	src = strings.Replace(src, "--[[profile:flush]]", profFlush, 1)
	return markRe.ReplaceAllString(src, "mark('$1')")
}

// profileLib is the instrumented library.
var profileLib = newLibrary(lib.name+"_profile", "rc"+strconv.Itoa(LibraryVersion)+"p_", profiled)

// ProfileScripts makes f call the instrumented claim, complete and
// complete_claim (loading the instrumented library, whose code an earlier
// build may have left under its name).
func (f *Redis) ProfileScripts() {
	if err := loadLibrary(context.Background(), f.shards[0].rdb, profileLib); err != nil {
		panic(err)
	}
	for _, s := range f.shards {
		s.libFor = func(name string) *library {
			if name == "claim" || name == "complete" || name == "complete_claim" {
				return profileLib
			}
			return lib
		}
	}
}

// ProfileSection is one section's total time and its invocations.
type ProfileSection struct{ Us, N int64 }

// ScriptProfile reads the sections' totals so far.
func (f *Redis) ScriptProfile(ctx context.Context) (map[string]ProfileSection, error) {
	return readProfile(ctx, f.shards[0].rdb, f.shards[0].keys.Prefix+"profile")
}

func readProfile(ctx context.Context, rdb redis.UniversalClient, key string) (map[string]ProfileSection, error) {
	entries, err := rdb.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]ProfileSection{}
	for _, e := range entries {
		for _, line := range strings.Split(e, "\n") {
			var name string
			var us, n int64
			if _, err := fmt.Sscanf(line, "%s %d %d", &name, &us, &n); err != nil {
				return nil, fmt.Errorf("profile entry %q: %w", line, err)
			}
			s := out[name]
			s.Us += us
			s.N += n
			out[name] = s
		}
	}
	return out, nil
}

// MarkCostUs measures what one marker adds to the section it ends, in µs:
// 1000 markers in a row, nothing between them; the least of 5 calls.
func MarkCostUs(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	markLib := &library{name: "redcrawl_markcost", ns: "rcmark_", src: "#!lua name=redcrawl_markcost\n" +
		profiled("--[[profile:decl]]\nlocal P = 'markcost:'\nredis.register_function('rcmark_cal', function()\n--[[profile:start]]\n"+
			"for _ = 1, 1000 do\n--[[mark:cal]]\nend\n--[[profile:flush]]\nreturn 1\nend)\n")}
	if err := loadLibrary(ctx, rdb, markLib); err != nil {
		return 0, err
	}
	key := "markcost:profile"
	defer rdb.Del(ctx, key)
	best := -1.0
	for range 5 {
		rdb.Del(ctx, key)
		if err := rdb.FCall(ctx, markLib.fn("cal"), nil).Err(); err != nil {
			return 0, err
		}
		prof, err := readProfile(ctx, rdb, key)
		if err != nil {
			return 0, err
		}
		if c := float64(prof["cal"].Us) / float64(prof["cal"].N); best < 0 || c < best {
			best = c
		}
	}
	return best, nil
}

// noopLib has one function that takes any KEYS and ARGV and does nothing.
var noopLib = &library{name: "redcrawl_noop", ns: "rcnoop_",
	src: "#!lua name=redcrawl_noop\nredis.register_function('rcnoop_args', function() return 1 end)\n"}

// ArgsOnlyUs is the Redis time (INFO commandstats, µs) of a function that
// does nothing, called with the KEYS and ARGV CompleteClaim would send
// for cs and max: what making them into Lua values costs.
func (f *Redis) ArgsOnlyUs(ctx context.Context, slave string, cs []Completion, max int) (int64, error) {
	args, _, err := f.shards[0].completeArgs(slave, cs)
	if err != nil {
		return 0, err
	}
	args = append(args, max, boolArg(false), 0)
	if err := loadLibrary(ctx, f.shards[0].rdb, noopLib); err != nil {
		return 0, err
	}
	u0, err := fcallUsec(ctx, f.shards[0].rdb)
	if err != nil {
		return 0, err
	}
	argv := append([]any{f.shards[0].keys.Prefix}, args...)
	if err := f.shards[0].rdb.FCall(ctx, noopLib.fn("args"), f.shards[0].allKeys, argv...).Err(); err != nil {
		return 0, err
	}
	u1, err := fcallUsec(ctx, f.shards[0].rdb)
	return u1 - u0, err
}

// fcallUsec is INFO commandstats' usec of fcall.
func fcallUsec(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	stats, err := testutil.CommandStats(ctx, rdb)
	return stats["fcall"].Usec, err
}

// CompleteRemoteOnly runs the first step of a sharded completion alone:
// the links for other shards, as a slave that dies before its ack would.
func (f *Redis) CompleteRemoteOnly(ctx context.Context, slave string, cs []Completion) error {
	_, _, remote, remotePol, err := f.splitCompletions(cs)
	if err != nil {
		return err
	}
	return f.sendRemote(ctx, slave, remote, remotePol)
}

// smallMemory are TestLibraryMemory's bounds on the library's Lua memory:
// small enough that a few hundred URLs pass them.
var smallMemory = luaMemory{prefixes: 6, settings: 3, names: 300, tableNames: 200, sweep: 60}

// smallMemoryLib is the library with those bounds, under its own name:
// only the calls of a frontier that UseSmallLibraryMemory touch its state.
var smallMemoryLib = newLibraryMemory(lib.name+"_small", "rc"+strconv.Itoa(LibraryVersion)+"s_", nil, smallMemory)

// SmallLibraryMemory is smallMemory: prefixes, settings, names, table
// names and sweep.
var SmallLibraryMemory = [5]int{smallMemory.prefixes, smallMemory.settings, smallMemory.names,
	smallMemory.tableNames, smallMemory.sweep}

// UseSmallLibraryMemory makes f call the library of small Lua-memory
// bounds (loading it).
func (f *Redis) UseSmallLibraryMemory() {
	if err := loadLibrary(context.Background(), f.shards[0].rdb, smallMemoryLib); err != nil {
		panic(err)
	}
	for _, s := range f.shards {
		s.libFor = func(string) *library { return smallMemoryLib }
	}
}

// claimN leases up to n tasks, render tasks not included
// (Redis.ClaimWaitOpts with the default options).
func claimN(ctx context.Context, f interface {
	ClaimWaitOpts(context.Context, string, int, ClaimOptions) (ClaimResult, error)
}, slave string, n int) ([]Lease, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, n, ClaimOptions{})
	return res.Leases, err
}
