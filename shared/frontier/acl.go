package frontier

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/redcrawl/redcrawl/shared/config"
)

// Redis ACL rules for each role of a crawl (Redis >= 7.0: selectors and
// read/write key permissions).
//
//   - slave: FCALL on its crawl's functions library (library.go), never
//     EVAL, EVALSHA, SCRIPT or FUNCTION: it runs no Lua of its own. Redis
//     checks every command a function runs against the caller's rules, so
//     the rules also list, per group of keys, exactly the commands the
//     library runs on them for a slave (claim, complete, extend, links,
//     heartbeat, leave) and the few the slave runs itself (robots.txt
//     records, the rule set, its events): no DEL, UNLINK or RENAME of a
//     shared key, no command of one group on another's keys. Its own event
//     stream for XADD only (XADD's MAXLEN could trim a stream: a slave can
//     trim only its own); the registry for ZADD, ZSCORE and ZCARD only (it
//     can join and count, never remove another slave); its own lease, lease
//     data and heartbeat keys;
//     the settings, the rule set, the control hash, the scope hosts and
//     the finish hash (the heartbeat tells a slave the crawl finished)
//     read-only; the rules channel to subscribe. Nothing of another crawl,
//     no other slave's keys, and no administrative command: no CONFIG,
//     FLUSHALL/FLUSHDB, KEYS, SCAN, MODULE, DEBUG, SCRIPT, FUNCTION,
//     MONITOR, SHUTDOWN, ACL, CLIENT KILL, PUBLISH but on the work channel
//     (the functions it calls announce work there).
//
//     Know the limit: a function's commands are checked against the
//     caller's rights, so a slave's user may run those data commands
//     directly too (LPUSH a URL on a queue, LPOP one without a lease, SET a
//     large robots.txt record). A direct slave is for machines you trust;
//     on one you do not, run the slave against the master's work API, with
//     no Redis credential at all.
//   - master: every key and channel of its crawl with the data, stream,
//     transaction and pub/sub commands, FCALL and FUNCTION LOAD and LIST
//     (it loads the library), SCAN (deleting a crawl), MEMORY USAGE (the
//     size of a slave's event stream: the work API) and INFO (the
//     eviction-policy check); no EVAL, EVALSHA or SCRIPT, no other crawl,
//     nothing @dangerous or @admin besides INFO.
//   - admin: the master's rules plus FUNCTION DELETE and STATS and
//     read-only diagnostics (CONFIG GET, SLOWLOG GET, MEMORY USAGE, LATENCY
//     LATEST, CLIENT LIST): for an operator running bin/master's admin
//     commands and looking into Redis.
//
// A crawl name and a slave id hold only A-Z a-z 0-9 _ . - (validated
// here and by the config), so no glob character reaches a pattern and a
// slave's exact keys cannot match another's. Every key is given twice:
// crawl:{name}:… (shard 0, and a crawl of one shard) and crawl:{name:*}:…
// (shards 1 and up of a sharded crawl, whatever their count). A host
// holds no brace (urlx rejects them, and the functions take only a host
// that is its URL's authority) and a slave id no colon, so the * of a
// shard cannot stretch over another key's name: a key of slave a ends
// "}:s:a:lease", which no pattern of slave b matches.

// ACL roles.
const (
	RoleSlave  = "slave"
	RoleMaster = "master"
	RoleAdmin  = "admin"
)

var aclNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidName reports whether s may name a crawl: 1 to 64 of A-Z a-z 0-9 _
// . - (no hash-tag brace, glob character, colon or space), as crawl.name
// (a slave id: config.CheckSlaveID, the same characters).
func ValidName(s string) bool { return aclNameRE.MatchString(s) }

// connCommands are what a client runs to connect and route (go-redis:
// HELLO with AUTH and SETNAME, SELECT; a cluster client's
// slot map and replica reads), the clock, and what a durable call runs
// (durable.go: ROLE, to count a node's replicas, and WAIT for them).
var connCommands = []string{"+hello", "+auth", "+ping", "+select", "+client|setname",
	"+client|getname", "+client|id", "+cluster|slots", "+cluster|shards",
	"+cluster|nodes", "+cluster|info", "+readonly", "+readwrite", "+quit", "+reset", "+time",
	"+role", "+wait"}

// slaveGroups are the slave's shared frontier keys, in groups, with the
// commands the library runs on them for a slave (the functions' files say
// which key each command is on); a command on keys of two groups (EXISTS
// of a host's priorities and pq) keeps its keys in one group. The keys are
// given per Keys (shard 0's and the other shards').
var slaveGroups = []struct {
	keys func(k Keys) []string
	cmds []string
}{
	// meta: the declared key of every call, the seen buckets' state, the
	// lease and work counters, aopic's lambda, the crawl's creation, the
	// mark of waiting slaves (wait_until)
	{func(k Keys) []string { return []string{k.Meta} },
		[]string{"+fcall", "+fcall_ro", "+hget", "+hmget", "+hset", "+hsetnx", "+hexists", "+hincrby", "+hincrbyfloat", "+hdel"}},
	{func(k Keys) []string { return []string{k.Stats} }, []string{"+hget", "+hincrby"}},
	// the ready sets
	{func(k Keys) []string { return []string{k.Ready, k.RenderReady} },
		[]string{"+zadd", "+zrem", "+zrange", "+zrangebyscore", "+zscore", "+exists"}},
	// the hosts' politeness hashes
	{func(k Keys) []string {
		return []string{k.HostNext, k.HostInfl, k.HostDelay, k.HostPDelay, k.HostJitter, k.HostConc}
	}, []string{"+hget", "+hmget", "+hset", "+hdel", "+exists"}},
	{func(k Keys) []string { return []string{k.Retry} }, []string{"+zrangebyscore", "+zrange", "+zrem", "+zadd"}},
	{func(k Keys) []string { return []string{k.Failed} }, []string{"+rpush"}},
	{func(k Keys) []string { return []string{k.PQData} }, []string{"+hget", "+hset", "+hdel"}},
	{func(k Keys) []string { return []string{k.HostPages} }, []string{"+hget", "+hset", "+hsetnx"}},
	// the idle hosts whose next fetch time is pending
	{func(k Keys) []string { return []string{k.Cool} }, []string{"+zadd", "+zrem", "+zrangebyscore"}},
	// the fresh hosts' tasks
	{func(k Keys) []string { return []string{k.Fresh} }, []string{"+hget", "+hset", "+hdel", "+hscan", "+exists"}},
	{func(k Keys) []string { return []string{k.QueryVars} }, []string{"+hincrby"}},
	{func(k Keys) []string { return []string{k.Validators} }, []string{"+exists", "+hmget", "+hdel"}},
	// a host's queues, priorities and importance-ordered queues, static
	// and render
	{func(k Keys) []string {
		var out []string
		for _, sfx := range []string{sfxQueue, sfxPrios, sfxPQ, sfxRQueue, sfxRPrios, sfxRPQ} {
			out = append(out, k.Prefix+sfx+"*")
		}
		return out
	}, []string{"+lpush", "+rpush", "+lpop", "+llen", "+zadd", "+zrange", "+zrem", "+zpopmin", "+zscore", "+zincrby", "+exists"}},
	// dedup: the seen buckets (sets)
	// and the Bloom filter's segments
	{func(k Keys) []string { return []string{k.Prefix + sfxSeen + "*"} },
		[]string{"+sismember", "+sadd", "+smembers", "+srem", "+hexists", "+hsetnx"}},
	{func(k Keys) []string { return []string{k.Prefix + sfxBloom + "*"} }, []string{"+getbit", "+setbit"}},
	{func(k Keys) []string { return []string{k.Prefix + sfxContent + "*"} }, []string{"+hsetnx", "+hget"}},
	// the crawl's limits: a claim takes pages, a completion counts items
	// (limits.lua: limit_take)
	{func(k Keys) []string { return []string{k.Limits} }, []string{"+exists", "+hmget", "+hincrby"}},
	// robots.txt records: the slave reads and writes them itself
	{func(k Keys) []string { return []string{k.Prefix + sfxRobots + "*"} }, []string{"+get", "+set", "+pttl"}},
}

// slaveOwnCommands are what the library runs on a slave's own lease,
// lease data and heartbeat keys.
var slaveOwnCommands = []string{"+zadd", "+zrem", "+zrange", "+zcard", "+hget", "+hmget", "+hset", "+hdel", "+hgetall",
	"+hlen", "+get", "+set", "+exists", "+del", "+unlink"}

// slaveReadCommands read the settings, the rule set, the control hash, the
// scope sets and the finish hash.
var slaveReadCommands = []string{"+get", "+hget", "+hmget", "+hkeys", "+hgetall", "+sismember", "+exists"}

// ACLRules returns the Redis ACL rules (the arguments of ACL SETUSER after
// the user name, or the words after "user NAME" of an ACL file line) of a
// role of a crawl. slave names the slave for RoleSlave (one Redis user
// per slave) and must be empty otherwise. The rules start with reset: they
// are the user's whole definition, without a password (WithPassword).
func ACLRules(crawl, role, slave string) ([]string, error) {
	if !ValidName(crawl) {
		return nil, fmt.Errorf("acl: crawl name %q: want 1 to 64 of A-Z a-z 0-9 _ . -", crawl)
	}
	k := NewKeys(crawl)
	rules := []string{"reset", "on", "resetkeys", "resetchannels", "-@all"}
	rules = append(rules, connCommands...)
	switch role {
	case RoleSlave:
		if err := config.CheckSlaveID(slave); err != nil {
			return nil, fmt.Errorf("acl: slave id: %w", err)
		}
		// the rules and work channels, to follow them; the work channel
		// also to publish the wake-ups of the functions a slave calls
		// (wake_waiters): at worst a hostile slave wakes the others
		rules = append(rules, "&"+k.RulesChannel, "&"+k.WorkChannel, "+subscribe", "+unsubscribe",
			selector(nil, "", []string{"&" + k.WorkChannel, "+publish"}))
		// every key twice: shard 0's crawl:{name}:… and the other
		// shards' crawl:{name:*}:… (any shard count)
		both := []Keys{k, NewKeys(crawl + ":*")}
		for _, g := range slaveGroups {
			var keys []string
			for _, k := range both {
				keys = append(keys, g.keys(k)...)
			}
			rules = append(rules, selector(keys, "~", g.cmds))
		}
		var read, quiet, events, registry, own []string
		for _, k := range both {
			read = append(read, k.Settings, k.Rules, k.Control, k.Prefix+sfxScope+"*", k.Finish)
			// the keys a claim or a completion asks about in one EXISTS
			// (FRESH.quiet in lua/cache.lua: K.quiet), keys of several groups
			quiet = append(quiet, k.HostPDelay, k.HostJitter, k.HostConc, k.HostDelay, k.RenderReady, k.Validators,
				k.Retry, k.Cool, k.Fresh, k.Control)
			events = append(events, k.SlaveEvents(slave))
			registry = append(registry, k.Slaves)
			own = append(own, k.SlaveLease(slave), k.SlaveLeaseData(slave), k.SlaveBeat(slave))
		}
		rules = append(rules, selector(read, "%R~", slaveReadCommands))
		rules = append(rules, selector(quiet, "%R~", []string{"+exists"}))
		rules = append(rules, selector(events, "%W~", []string{"+xadd"}))
		rules = append(rules, selector(registry, "~", []string{"+zadd", "+zscore", "+zcard"}))
		rules = append(rules, selector(own, "~", slaveOwnCommands))
	case RoleMaster, RoleAdmin:
		if slave != "" {
			return nil, fmt.Errorf("acl: --slave goes with the slave role only")
		}
		rules = append(rules, "~"+k.Prefix+"*", "&"+k.Prefix+"*", "~crawl:{"+crawl+":*}:*",
			"+@read", "+@write", "+@keyspace", "+@string", "+@bitmap", "+@hash", "+@list",
			"+@set", "+@sortedset", "+@stream", "+@transaction", "+@pubsub",
			"+@fast", "+@slow", "-@dangerous", "-@admin", "+info", "+scan", "+memory|usage",
			"-@scripting", "+fcall", "+fcall_ro", "+function|load", "+function|list",
			"-flushall", "-flushdb", "-keys", "-swapdb", "-move", "-migrate", "-restore",
			"-debug", "-module", "-monitor", "-shutdown", "-acl", "-failover")
		rules = append(rules, connCommands...)
		if role == RoleAdmin {
			rules = append(rules, "+function|delete", "+function|stats", "+config|get", "+slowlog|get", "+slowlog|len", "+memory|usage",
				"+memory|stats", "+latency|latest", "+latency|history", "+client|list", "+client|info",
				"+acl|whoami", "+dbsize")
		}
	default:
		return nil, fmt.Errorf("acl: role %q: want slave, master or admin", role)
	}
	return rules, nil
}

// selector is one ACL selector: the keys with one permission prefix (~
// read and write, %R~ read, %W~ write) and the commands allowed on them.
func selector(keys []string, perm string, cmds []string) string {
	parts := make([]string, 0, len(keys)+len(cmds))
	for _, k := range keys {
		parts = append(parts, perm+k)
	}
	parts = append(parts, cmds...)
	return "(" + strings.Join(parts, " ") + ")"
}

// ACLUserName is the Redis user name of a role: redcrawl-slave-<slave>,
// redcrawl-master-<crawl> or redcrawl-admin-<crawl>.
func ACLUserName(crawl, role, slave string) string {
	if role == RoleSlave {
		return "redcrawl-slave-" + slave
	}
	return "redcrawl-" + role + "-" + crawl
}

// WithPassword adds a password to rules as its SHA-256 (#hex), so an ACL
// file never holds it in clear.
func WithPassword(rules []string, password string) []string {
	sum := sha256.Sum256([]byte(password))
	out := append([]string(nil), rules...)
	// after reset and on
	return append(out[:2:2], append([]string{"#" + hex.EncodeToString(sum[:])}, out[2:]...)...)
}

// ACLFileLine formats a user as a line of a Redis ACL file (aclfile).
func ACLFileLine(user string, rules []string) string {
	// an ACL file line does not take reset: a user is defined whole there
	var out []string
	for _, r := range rules {
		if r != "reset" {
			out = append(out, r)
		}
	}
	return "user " + user + " " + strings.Join(out, " ")
}
