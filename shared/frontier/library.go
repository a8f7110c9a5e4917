package frontier

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// The frontier's Lua is one Redis Functions library (Redis >= 7.0): the
// files of lua/, in libraryFiles' order, after a header written here from
// the key schema (keys.go) and the limits below. A function is called by
// its name, NS + what the file registers (FCALL rc11_claim 1 <meta> ...),
// with the crawl's meta key as its one key and the crawl's prefix first in
// ARGV; each function's KEYS/ARGV/returns contract is beside it in its
// file, and the Go method that calls it says which.
//
// The library's name carries its version, LibraryVersion, and so do its
// functions' names: processes of two versions never run each other's
// code, two versions can serve two crawls on one Redis, and a slave that
// finds its version missing says which version the crawl's master loaded
// (libraryMissing). TestLibraryVersion fails when the library's code
// changes without a new version.
//
// Only a master (or an admin) loads the library (LoadLibrary: FUNCTION
// LOAD, on every primary of a cluster; replicas get it by replication). A
// slave's Redis user may call the functions (FCALL) but run no Lua of its
// own: no EVAL, EVALSHA, SCRIPT or FUNCTION (acl.go).

// LibraryVersion is the version of the frontier's functions library.
const LibraryVersion = 11

//go:embed lua/*.lua
var luaFiles embed.FS

// libraryFiles are the library's files in the order they are joined: a
// file uses what the files before it define.
var libraryFiles = []string{"base", "dedup", "cache", "queue", "claim", "complete", "lease", "seed",
	"registry", "finish", "admin", "limits"}

// Limits of what a function accepts: a call over one fails with "ERR
// redcrawl: ..." before it writes anything. The Go side keeps within them
// (completeArgs caps reasons and events), so an honest caller never meets
// them.
const (
	// maxClaim is the most leases one claim asks for.
	maxClaim = 1000
	// maxCompletions is the most completions (or leases to extend) in a
	// call.
	maxCompletions = 1000
	// maxLinksPerCompletion is the most links of one completion: a
	// sitemap's 50,000 URLs.
	maxLinksPerCompletion = 50000
	// maxEventsPerCompletion is the most events of one completion.
	maxEventsPerCompletion = 10000
	// maxPoliciesPerCompletion is the most host policies of one completion.
	maxPoliciesPerCompletion = 10000
	// maxEventBytes is the longest event record.
	maxEventBytes = 1 << 20
	// maxReasonBytes is the longest reason of a completion, or detail of a
	// leave.
	maxReasonBytes = 1024
	// maxHeartbeatBytes is the longest heartbeat record.
	maxHeartbeatBytes = 64 << 10
	// maxHostBytes is the longest host key.
	maxHostBytes = 300
	// maxTaskBytes is the longest task string.
	maxTaskBytes = urlx.MaxURLLength + 128
	// maxPolicyDelayMs and maxPolicyConcurrency bound a host policy.
	maxPolicyDelayMs     = 24 * 3600 * 1000
	maxPolicyConcurrency = 1000
	// maxShards is the most shards of a crawl.
	maxShards = 1024
)

// eventTypes are the event types a completion may carry.
var eventTypes = []events.Type{events.TypePage, events.TypeException, events.TypeSlave, events.TypeHeartbeat,
	events.TypeLost, events.TypeProxy, events.TypeDuplicate, events.TypeItem}

// keyPrefixes name the per-host and per-bucket key prefixes for the Lua
// (K.<name> .. host or bucket).
var keyPrefixes = []struct{ lua, suffix string }{
	{"SEEN_PFX", sfxSeen}, {"QUEUE_PFX", sfxQueue}, {"PRIOS_PFX", sfxPrios}, {"PQ_PFX", sfxPQ},
	{"CONTENT_PFX", sfxContent}, {"RQUEUE_PFX", sfxRQueue}, {"RPRIOS_PFX", sfxRPrios}, {"RPQ_PFX", sfxRPQ},
	{"BLOOM_PFX", sfxBloom}, {"SLAVE_PFX", sfxSlave}, {"SCOPE_PFX", sfxScope},
}

// library is one build of the library: the production one (lib) or the
// section profile's instrumented copy (export_test.go).
type library struct {
	name string // FUNCTION LOAD's library name
	ns   string // the prefix of its functions' names
	src  string // its code
}

// fn returns the name of the library's function name.
func (l *library) fn(name string) string { return l.ns + name }

// lib is the library every frontier calls.
var lib = newLibrary("redcrawl_"+strconv.Itoa(LibraryVersion), "rc"+strconv.Itoa(LibraryVersion)+"_", nil)

// luaMemory bounds what the library keeps between calls in Redis's Lua
// heap (base.lua: keys_of, name_cache, sweep). A bigger heap costs every
// call: each call's collector steps walk it.
type luaMemory struct {
	// prefixes is the most key tables (crawl prefixes) kept; one more
	// empties them all.
	prefixes int
	// settings is the most parsed crawl settings kept.
	settings int
	// names is the most key names (seen buckets, Bloom segments) the key
	// tables hold together, ~85 bytes each.
	names int
	// tableNames is the most names of one kind one key table holds.
	tableNames int
	// sweep is the calls between two sweeps: a key table or settings no
	// call used since the last sweep goes at the next.
	sweep int
}

// defaultLuaMemory keeps the key names of two big crawls, or of many
// small ones (8,192 names, ~0.7 MB at most), and sweeps every 10,000
// calls (seconds of a busy crawl): a key table without its names is ~6
// KB, and one rebuilt after a sweep costs a call some 60 concatenations. Measured: 7 MB more of Lua heap
// took a 16-slave crawl's Redis CPU a page from 108-122 to 175 µs
// (docs/benchmarks.md, "The library's Lua memory").
var defaultLuaMemory = luaMemory{prefixes: 256, settings: 64, names: 8192, tableNames: 4096, sweep: 10000}

// newLibrary builds a library named name whose functions' names start
// with ns; edit, when set, rewrites the joined files (the profile's
// instrumentation).
func newLibrary(name, ns string, edit func(string) string) *library {
	return newLibraryMemory(name, ns, edit, defaultLuaMemory)
}

// newLibraryMemory is newLibrary with the given bounds on the library's
// Lua memory (the tests' small ones).
func newLibraryMemory(name, ns string, edit func(string) string, mem luaMemory) *library {
	var body strings.Builder
	for _, f := range libraryFiles {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(fmt.Sprintf("frontier: library file %s: %v", f, err))
		}
		body.Write(b)
		body.WriteByte('\n')
	}
	src := body.String()
	if edit != nil {
		src = edit(src)
	}
	return &library{name: name, ns: ns, src: libraryHeader(name, ns, mem) + src}
}

// libraryHeader is what the files are given: the library's name and
// function prefix, the key schema's names, the limits.
func libraryHeader(name, ns string, mem luaMemory) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n", name)
	b.WriteString("-- written by library.go from the key schema (keys.go) and the limits\n")
	fmt.Fprintf(&b, "local NS = %q\n", ns)
	b.WriteString("local FIXED_KEYS = {")
	for _, f := range fixedKeys {
		fmt.Fprintf(&b, "%s = %q, ", f.lua, f.suffix)
	}
	b.WriteString("}\nlocal KEY_PREFIXES = {")
	for _, p := range keyPrefixes {
		fmt.Fprintf(&b, "%s = %q, ", p.lua, p.suffix)
	}
	b.WriteString("}\nlocal EVENT_TYPES = {")
	for _, t := range eventTypes {
		fmt.Fprintf(&b, "[%q] = true, ", string(t))
	}
	b.WriteString("}\n")
	fmt.Fprintf(&b, "local TUPLE, EVENTS_PER_ENTRY, SETTINGS_FIELDS = %d, %d, %d\n", tupleLen, eventsPerEntry, settingsFields)
	fmt.Fprintf(&b, "local WORK_MESSAGE = %q\n", WorkMessage)
	fmt.Fprintf(&b, "local SEEN_FLOOR, SEEN_MAX_LEVEL = %d, %d\n", seenFloor, seenMaxLevel)
	fmt.Fprintf(&b, "local LIMITS = {claim = %d, completions = %d, links = %d, events = %d, policies = %d, "+
		"event = %d, reason = %d, heartbeat = %d, host = %d, url = %d, task = %d, policy_delay = %d, "+
		"policy_conc = %d, shards = %d, batch = %d, recover = %d, prefix = %d, "+
		"prefixes = %d, settings = %d, names = %d, table_names = %d, sweep = %d, slaves = %d, held = %d, recover_page = %d, "+
		"items = %d, limit = %d}\n",
		maxClaim, maxCompletions, maxLinksPerCompletion, maxEventsPerCompletion, maxPoliciesPerCompletion,
		maxEventBytes, maxReasonBytes, maxHeartbeatBytes, maxHostBytes, urlx.MaxURLLength, maxTaskBytes,
		maxPolicyDelayMs, maxPolicyConcurrency, maxShards, seedBatch, maxRecover, len("crawl:{}:")+64+16,
		mem.prefixes, mem.settings, mem.names, mem.tableNames, mem.sweep, maxSlaves, maxHeld, recoverPage,
		maxLimitItems, maxLimit)
	return b.String()
}

// maxRecover is the most leases one recover call takes back.
const maxRecover = 10000

// maxSlaves is the most slaves a crawl's registry (per shard) holds: a
// heartbeat that would register one more is refused, and a function that
// loops over the registry reads its first maxSlaves members (a slave's
// Redis user may ZADD it, so it is no bound on the set itself:
// PruneRegistry drops the members that are no slave).
const maxSlaves = 1024

// recoverPage is how many slaves' leases one recover_expired call looks
// at (some 2 ms of Redis): RecoverExpired walks the registry in calls.
const recoverPage = 128

// maxHeld is the most leases one slave holds on a shard (a claim leases
// no more), and so the most a retire or a leave takes back in one call.
const maxHeld = 10000

// Source returns the library's code as FUNCTION LOAD gets it.
func LibrarySource() string { return lib.src }

// LibraryName returns the library's name (FUNCTION LIST LIBRARYNAME).
func LibraryName() string { return lib.name }

// LoadLibrary loads the library into Redis, on every primary of a
// cluster, unless it is there with the same code; a library of that name
// with other code (a development build) is replaced. Only the master's or
// the admin's Redis user may (acl.go).
func LoadLibrary(ctx context.Context, rdb redis.UniversalClient) error {
	return loadLibrary(ctx, rdb, lib)
}

func loadLibrary(ctx context.Context, rdb redis.UniversalClient, l *library) error {
	load := func(ctx context.Context, c redis.Cmdable) error {
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: l.name, WithCode: true}).Result()
		if err != nil {
			return err
		}
		for _, have := range libs {
			if have.Name == l.name && have.Code == l.src {
				return nil
			}
		}
		if len(libs) > 0 {
			return c.FunctionLoadReplace(ctx, l.src).Err()
		}
		err = c.FunctionLoad(ctx, l.src).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil // another master loaded it meanwhile
		}
		return err
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, rdb)
	}
	if err != nil {
		if strings.Contains(err.Error(), "NOPERM") {
			return fmt.Errorf("load redcrawl library %s: %w (only a master's or an admin's Redis user may load it: bin/master acl --role master)", l.name, err)
		}
		return wrap("load redcrawl library "+l.name, err)
	}
	return nil
}

// isNoFunction reports whether err says a function is not loaded.
func isNoFunction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// ErrNoLibrary marks a call to a function the Redis does not have: the
// library of this version is not loaded there (yet: a master loads it; a
// cluster node that joined gets it from the master's next check).
var ErrNoLibrary = errors.New("redcrawl library not loaded")

// call runs one of the library's functions on this shard with the crawl's
// meta key and prefix; a master (Options.Slave "") loads the library when
// it is missing and calls again.
func (f *shard) call(ctx context.Context, name string, args ...any) (any, error) {
	l := f.library()
	if f.libFor != nil {
		l = f.libFor(name)
	}
	argv := f.fcallArgs(l.fn(name), args)
	res, err := f.fcall(ctx, argv)
	if isNoFunction(err) {
		if f.opt.Slave == "" {
			if lerr := loadLibrary(ctx, f.rdb, l); lerr != nil {
				return nil, lerr
			}
			return f.fcall(ctx, argv)
		}
		return nil, f.libraryMissing(ctx, err)
	}
	return res, err
}

// fcallArgs is the command FCALL fn with the shard's keys, its prefix and
// args, built in one slice (go-redis's FCall copies the arguments twice,
// and a completion's are thousands).
func (f *shard) fcallArgs(fn string, args []any) []any {
	argv := make([]any, 0, 4+len(f.allKeys)+len(args))
	argv = append(argv, "fcall", fn, len(f.allKeys))
	for _, k := range f.allKeys {
		argv = append(argv, k)
	}
	argv = append(argv, f.keys.Prefix)
	return append(argv, args...)
}

// fcallCmd is the command of an FCALL fcallArgs built, as go-redis's
// FCall makes it: its first key, for a cluster client's routing, at
// position 3.
func (f *shard) fcallCmd(ctx context.Context, argv []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, argv...)
	if len(f.allKeys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// fcall runs an FCALL fcallArgs built.
func (f *shard) fcall(ctx context.Context, argv []any) (any, error) {
	cmd := f.fcallCmd(ctx, argv)
	_ = f.rdb.Process(ctx, cmd)
	return cmd.Result()
}

// library returns the library this shard calls.
func (f *shard) library() *library { return lib }

// libraryMissing explains a function not found to a slave, which cannot
// load the library: which version it needs and which the crawl's master
// loaded (meta lib).
func (f *shard) libraryMissing(ctx context.Context, err error) error {
	have, _ := f.rdb.HGet(ctx, f.keys.Meta, metaLibrary).Result()
	msg := fmt.Sprintf("this binary calls redcrawl library %s, which this Redis does not have", f.library().name)
	switch {
	case have == "":
		msg += ": start a master of this version (bin/master run), which loads it"
	case have != f.library().name:
		msg += fmt.Sprintf("; the crawl's master loaded %s: run masters and slaves of one version", have)
	default:
		msg += " on this node (a cluster node that joined?): the master loads it at its next check"
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, msg, errors.Join(ErrNoLibrary, err))
}

// metaLibrary is the meta field naming the library the crawl's master
// loaded.
const metaLibrary = "lib"

// libraryFns lists the functions a library registers, for the tests.
func (l *library) functions() []string {
	re := regexp.MustCompile(`register\('(\w+)'`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(l.src, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}
