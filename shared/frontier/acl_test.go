package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

func TestACLRulesPerRole(t *testing.T) {
	for _, tc := range []struct {
		name, crawl, role, slave string
		wantErr                  bool
		has, hasNot              []string
	}{
		{name: "slave", crawl: "news", role: frontier.RoleSlave, slave: "pi1",
			has: []string{"-@all", "&crawl:{news}:rules:changed", "(%W~crawl:{news}:s:pi1:ev %W~crawl:{news:*}:s:pi1:ev +xadd)",
				"(~crawl:{news}:slaves ~crawl:{news:*}:slaves +zadd +zscore +zcard)",
				"+fcall"},
			hasNot: []string{"+@all", "~*", "+config", "+flushall", "+keys", "+scan", "+del",
				"+eval", "+evalsha", "+eval_ro", "+evalsha_ro", "+@scripting", "+script", "+function", "+function|load"}},
		{name: "master", crawl: "news", role: frontier.RoleMaster,
			has: []string{"~crawl:{news}:*", "~crawl:{news:*}:*", "&crawl:{news}:*", "-@dangerous", "+info", "-flushall",
				"-@scripting", "+fcall", "+function|load", "+function|list"},
			hasNot: []string{"~*", "+config|get", "+eval", "+evalsha", "+@scripting", "+function|delete", "+function|flush"}},
		{name: "admin", crawl: "news", role: frontier.RoleAdmin, has: []string{"+config|get", "-@dangerous", "+function|delete"},
			hasNot: []string{"+eval", "+function|flush"}},
		{name: "slave needs an id", crawl: "news", role: frontier.RoleSlave, wantErr: true},
		{name: "slave id with a glob", crawl: "news", role: frontier.RoleSlave, slave: "pi*", wantErr: true},
		{name: "slave id with a colon", crawl: "news", role: frontier.RoleSlave, slave: "pi:1", wantErr: true},
		{name: "crawl with a brace", crawl: "ne}ws", role: frontier.RoleMaster, wantErr: true},
		{name: "crawl with a glob", crawl: "n[e]ws", role: frontier.RoleMaster, wantErr: true},
		{name: "master with a slave id", crawl: "news", role: frontier.RoleMaster, slave: "pi1", wantErr: true},
		{name: "unknown role", crawl: "news", role: "root", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := frontier.ACLRules(tc.crawl, tc.role, tc.slave)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			// words: every rule and every word of a selector; a word
			// of hasNot must not appear at all, except that a slave may
			// delete its own keys
			words := map[string]bool{}
			for _, r := range rules {
				words[r] = true
				own := strings.Contains(r, ":s:"+tc.slave+":lease ")
				for _, w := range strings.Fields(strings.Trim(r, "()")) {
					if !(own && w == "+del") {
						words[w] = true
					}
				}
			}
			for _, h := range tc.has {
				if !words[h] {
					t.Errorf("rules lack %q:\n%s", h, strings.Join(rules, " "))
				}
			}
			for _, h := range tc.hasNot {
				if words[h] {
					t.Errorf("rules hold %q:\n%s", h, strings.Join(rules, " "))
				}
			}
		})
	}
}

// TestACLSlaveLeaseIsolation: against a real redis-server with one ACL user
// per slave, each slave's user runs the whole slave side of the frontier,
// and no slave's user can take, extend or ack another slave's lease, by
// the frontier's calls or by raw commands.
func TestACLSlaveLeaseIsolation(t *testing.T) {
	crawl := testutil.CrawlName("acl")
	srv := frontiertest.StartACLRedis(t, crawl, "s1", "s2")
	ctx := context.Background()
	opt := frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 10000, DeadAfter: 10 * time.Second}
	master, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleMaster, ""), opt)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleSlave, "s1"), asSlave(opt, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleSlave, "s2"), asSlave(opt, "s2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0), tk("http://c.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		f  *frontier.Redis
		id string
	}{{s1, "s1"}, {s2, "s2"}} {
		if err := s.f.Heartbeat(ctx, events.Heartbeat{Slave: s.id, Host: "box"}); err != nil {
			t.Fatalf("%s heartbeat: %v", s.id, err)
		}
	}
	l1, err := claimN(ctx, s1, "s1", 2)
	if err != nil || len(l1) != 2 {
		t.Fatalf("s1 claim: %d leases, %v", len(l1), err)
	}
	if held, err := s1.Extend(ctx, "s1", l1); err != nil || !held[0] || !held[1] {
		t.Fatalf("s1 extends its own leases: %v %v", held, err)
	}

	// s2 with s1's identity: refused by Redis (s1's keys are not s2's)
	if _, err := claimN(ctx, s2, "s1", 1); !isNoPerm(err) {
		t.Errorf("s2 claims as s1: err = %v, want NOPERM", err)
	}
	if _, err := s2.Extend(ctx, "s1", l1); !isNoPerm(err) {
		t.Errorf("s2 extends s1's leases: err = %v, want NOPERM", err)
	}
	if _, err := s2.Complete(ctx, "s1", []frontier.Completion{{Lease: l1[0], Outcome: frontier.Done}}); !isNoPerm(err) {
		t.Errorf("s2 acks s1's lease as s1: err = %v, want NOPERM", err)
	}
	if err := s2.Leave(ctx, "s1", "forged"); !isNoPerm(err) {
		t.Errorf("s2 makes s1 leave: err = %v, want NOPERM", err)
	}
	// the refused scripts wrote nothing: c.test's task is still queued
	if st, err := master.Stats(ctx); err != nil || st.Queued != 1 || st.InFlight != 2 {
		t.Fatalf("after the forged calls: queued %d, in flight %d, %v; want 1, 2", st.Queued, st.InFlight, err)
	}
	// s2 with its own identity and s1's lease tokens: not its leases
	if acked, err := s2.Complete(ctx, "s2", []frontier.Completion{{Lease: l1[0], Outcome: frontier.Done}}); err != nil || acked[0] {
		t.Errorf("s2 acks s1's lease as s2: acked %v, %v; want refused", acked, err)
	}
	if held, err := s2.Extend(ctx, "s2", l1); err != nil || held[0] || held[1] {
		t.Errorf("s2 extends s1's leases as s2: %v, %v; want not held", held, err)
	}
	// raw commands on s1's keys, the registry and the control keys
	keys := master.Keys()
	s2c := srv.Client(t, frontier.RoleSlave, "s2")
	for _, tc := range []struct {
		name string
		args []any
	}{
		{"take s1's lease (lease zset)", []any{"ZADD", keys.SlaveLease("s1"), 0, l1[0].URL}},
		{"take s1's lease (lease data)", []any{"HSET", keys.SlaveLeaseData("s1"), l1[0].URL, "s2\t1\t0\ta.test\t0\t0\t0\t0\t" + l1[0].URL}},
		{"read s1's lease data", []any{"HGETALL", keys.SlaveLeaseData("s1")}},
		{"drop s1's leases", []any{"DEL", keys.SlaveLease("s1")}},
		{"forge s1's heartbeat", []any{"SET", keys.SlaveBeat("s1"), "0\t{}"}},
		{"drop s1 from the registry", []any{"ZREM", keys.Slaves, "s1"}},
		{"delete the registry", []any{"DEL", keys.Slaves}},
		{"pause the crawl", []any{"HSET", keys.Control, "paused", 1}},
		{"end the crawl", []any{"HSET", keys.Finish, "finished", 1}},
		{"drain s1", []any{"HSET", keys.Control, "drain:s1", 1}},
		{"read the dashboard's session epoch", []any{"HGET", keys.Sessions, "epoch"}},
		{"end the dashboard's sessions", []any{"DEL", keys.Sessions}},
		{"rewrite the rules", []any{"HSET", keys.Rules, "version", "evil"}},
		{"publish a rules version", []any{"PUBLISH", keys.RulesChannel, "evil"}},
		{"trim the event stream", []any{"XTRIM", keys.Events, "MAXLEN", 0}},
		{"delete the event stream", []any{"DEL", keys.Events}},
		{"delete a queue", []any{"DEL", keys.Prefix + "q:c.test:0"}},
		{"write another crawl", []any{"HSET", "crawl:{other}:meta", "x", 1}},
		{"read another crawl", []any{"HGETALL", "crawl:{other}:stats"}},
		{"a script on another crawl", []any{"EVAL", "return redis.call('HSET', KEYS[1], 'x', 1)", 1, "crawl:{other}:meta"}},
		{"a script writing the rules", []any{"EVAL", "return redis.call('HSET', ARGV[1], 'version', 'x')", 1, keys.Meta, keys.Rules}},
		{"a script deleting s1's leases", []any{"EVAL", "return redis.call('DEL', ARGV[1])", 1, keys.Meta, keys.SlaveLease("s1")}},
		{"CONFIG SET dir", []any{"CONFIG", "SET", "dir", "/tmp"}},
		{"CONFIG GET", []any{"CONFIG", "GET", "*"}},
		{"FLUSHALL", []any{"FLUSHALL"}},
		{"FLUSHDB", []any{"FLUSHDB"}},
		{"KEYS", []any{"KEYS", "*"}},
		{"SCAN", []any{"SCAN", 0}},
		{"MODULE LIST", []any{"MODULE", "LIST"}},
		{"DEBUG", []any{"DEBUG", "SLEEP", 0}},
		{"SCRIPT FLUSH", []any{"SCRIPT", "FLUSH"}},
		{"SCRIPT KILL", []any{"SCRIPT", "KILL"}},
		{"FUNCTION FLUSH", []any{"FUNCTION", "FLUSH"}},
		{"ACL SETUSER", []any{"ACL", "SETUSER", "redcrawl-slave-s2", "+@all", "~*"}},
		{"SHUTDOWN", []any{"SHUTDOWN", "NOSAVE"}},
		{"MONITOR", []any{"MONITOR"}},
		{"CLIENT KILL", []any{"CLIENT", "KILL", "TYPE", "normal"}},
	} {
		// refused by the ACL itself (ACL DRYRUN; a script's commands are
		// checked as it runs them), and when tried
		dry := append([]any{"ACL", "DRYRUN", "redcrawl-slave-s2"}, tc.args...)
		if tc.args[0] == "EVAL" {
			// DRYRUN checks only EVAL itself
		} else if res, err := srv.Root.Do(ctx, dry...).Result(); err != nil || res == "OK" {
			t.Errorf("%s: ACL DRYRUN = %v, %v; want a refusal", tc.name, res, err)
		}
		if tc.args[0] == "DEBUG" {
			continue // refused before the ACL (enable-debug-command)
		}
		if err := s2c.Do(ctx, tc.args...).Err(); !isNoPerm(err) {
			t.Errorf("%s: %v; want NOPERM", tc.name, err)
		}
	}
	// the one channel a slave may publish on: the work channel (the
	// functions it calls wake the waiting slaves there)
	if err := s2c.Publish(ctx, keys.WorkChannel, "+work").Err(); err != nil {
		t.Errorf("publish on the work channel: %v", err)
	}
	// s1 is unharmed: it still holds, extends and acks its leases
	if held, err := s1.Extend(ctx, "s1", l1); err != nil || !held[0] || !held[1] {
		t.Fatalf("s1 extends after s2's attempts: %v %v", held, err)
	}
	acked, err := s1.Complete(ctx, "s1", []frontier.Completion{{Lease: l1[0], Outcome: frontier.Done}, {Lease: l1[1], Outcome: frontier.Done}})
	if err != nil || !acked[0] || !acked[1] {
		t.Fatalf("s1 acks: %v %v", acked, err)
	}
	// s2 works within its rights; its graceful leave gives back its lease,
	// and the master's monitor step drops it from the registry
	l2, err := claimN(ctx, s2, "s2", 5)
	if err != nil || len(l2) != 1 {
		t.Fatalf("s2 claim: %d, %v", len(l2), err)
	}
	if err := s2.Leave(ctx, "s2", "signal"); err != nil {
		t.Fatalf("s2 leaves: %v", err)
	}
	if n, err := master.RetireGone(ctx, "s2"); err != nil || n != 0 {
		t.Fatalf("retire gone s2: %d %v", n, err)
	}
	// the master takes back s1's leases when it dies
	l1b, err := claimN(ctx, s1, "s1", 5)
	if err != nil || len(l1b) != 1 {
		t.Fatalf("s1 claims the lease s2 gave back: %d %v", len(l1b), err)
	}
	if n, err := master.RecoverSlave(ctx, "s1"); err != nil || n != 1 {
		t.Fatalf("recover s1: %d %v", n, err)
	}
	st, err := master.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{1, 0, 2}, []int64{st.Queued, st.InFlight, st.Done}); d != "" {
		t.Errorf("queued, in flight, done (-want +got):\n%s", d)
	}
	// the only refusals are the ones this test provoked: every command the
	// slave side ran on its own behalf was allowed
	for _, d := range srv.Denials(t) {
		if !strings.HasPrefix(d, "redcrawl-slave-s2 ") {
			t.Errorf("unexpected ACL denial: %s", d)
		}
	}
}

func isNoPerm(err error) bool {
	if err == nil {
		return false
	}
	for _, s := range []string{"NOPERM", "no permissions", "can't run this command", "can't access at least one of the keys"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// TestACLSlaveSplitsSeen: a slave's Redis user may split the seen buckets
// its completions' links fill (growing buckets: a load of one URL a
// bucket, so they split at once), and what it adds stays seen.
func TestACLSlaveSplitsSeen(t *testing.T) {
	crawl := testutil.CrawlName("aclsplit")
	srv := frontiertest.StartACLRedis(t, crawl, "s1")
	ctx := context.Background()
	opt := frontier.WithSeenLoad(frontier.Options{Crawl: crawl, HostConcurrency: 100, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 10000, DeadAfter: 10 * time.Second}, 1)
	master, s1, ls := aclSeedClaim(t, srv, opt)
	var links []frontier.Task
	for i := range 600 {
		links = append(links, tk(fmt.Sprintf("http://%s.test/p%d", []string{"a", "b"}[i%2], i), 1))
	}
	cs := []frontier.Completion{
		{Lease: ls[0], Outcome: frontier.Done, Links: links[:300], ContentHash: 1},
		{Lease: ls[1], Outcome: frontier.Done, Links: links[300:], ContentHash: 2},
	}
	if acked, err := s1.Complete(ctx, "s1", cs); err != nil || !acked[0] || !acked[1] {
		t.Fatalf("s1 completes with 600 links: %v %v", acked, err)
	}
	level, err := srv.Client(t, frontier.RoleMaster, "").HGet(ctx, master.Keys().Meta, "seen_level").Int()
	if err != nil || level < 9 {
		t.Errorf("seen level %d, %v; want the slave's splits past level 9", level, err)
	}
	assertSeen(t, master, links, true)
}

// asSlave returns opt for slave id's frontier.
func asSlave(opt frontier.Options, id string) frontier.Options {
	opt.Slave = id
	return opt
}

// TestACLSlaveFreshHosts: a slave's Redis user runs the fresh hosts, the
// scope sets, the deferred hpages fields and
// the idle hosts' sweep: claims and completions with links, under scope by
// seeds, max_pages_per_host and a delay.
func TestACLSlaveFreshHosts(t *testing.T) {
	crawl := testutil.CrawlName("aclfresh")
	srv := frontiertest.StartACLRedis(t, crawl, "s1")
	ctx := context.Background()
	opt := frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3,
		ExpectedURLs: 10000, DeadAfter: 10 * time.Second, ScopeBySeeds: true, MaxPagesPerHost: 3,
		Delay: 5 * time.Millisecond}
	mrdb := srv.Client(t, frontier.RoleMaster, "")
	master, err := frontier.NewRedis(ctx, mrdb, opt)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleSlave, "s1"), asSlave(opt, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	links := []frontier.Task{tk("http://a.test/x", 1), tk("http://new.test/z", 1),
		tk("http://b.test/1", 1), tk("http://b.test/2", 1), tk("http://b.test/3", 1)}
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		ls, err := claimN(ctx, s1, "s1", 10)
		if err != nil {
			t.Fatalf("s1 claim: %v", err)
		}
		cs := make([]frontier.Completion, len(ls))
		for i, l := range ls {
			got = append(got, l.URL)
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, Links: links}
		}
		links = nil
		if len(cs) > 0 {
			if _, err := s1.Complete(ctx, "s1", cs); err != nil {
				t.Fatalf("s1 complete: %v", err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	sort.Strings(got)
	want := []string{"http://a.test/", "http://a.test/x", "http://b.test/", "http://b.test/1", "http://b.test/2"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claimed (-want +got):\n%s", d)
	}
}

// TestACLSlaveQuietExists checks that a slave's Redis user may run the one
// EXISTS with which a claim or a completion learns that the keys most
// calls find absent are (FRESH.quiet in lua/cache.lua), on every shard:
// without it the calls ask about each key (acl_check_cmd), correct but
// with more commands.
func TestACLSlaveQuietExists(t *testing.T) {
	crawl := testutil.CrawlName("aclquiet")
	srv := frontiertest.StartACLRedis(t, crawl, "s1")
	ctx := context.Background()
	for _, k := range []frontier.Keys{frontier.NewKeys(crawl), frontier.NewKeys(crawl + ":2")} {
		args := []any{"ACL", "DRYRUN", "redcrawl-slave-s1", "EXISTS", k.HostPDelay, k.HostJitter, k.HostConc,
			k.HostDelay, k.RenderReady, k.Validators, k.Retry, k.Cool, k.Fresh, k.Control}
		if res, err := srv.Root.Do(ctx, args...).Result(); err != nil || res != "OK" {
			t.Errorf("%s: ACL DRYRUN EXISTS of the quiet keys = %v, %v; want OK", k.Prefix, res, err)
		}
	}
}

// TestACLSlaveOldRules runs a slave whose Redis user was made by the acl
// of a build before the quiet keys' selector: its claims and completions
// ask about each key (acl_check_cmd refuses the one EXISTS), work, and
// leave nothing in the ACL log.
func TestACLSlaveOldRules(t *testing.T) {
	crawl := testutil.CrawlName("aclold")
	srv := frontiertest.StartACLRedis(t, crawl, "s1")
	ctx := context.Background()
	k := frontier.NewKeys(crawl)
	rules, err := frontier.ACLRules(crawl, frontier.RoleSlave, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, r := range rules {
		if !strings.Contains(r, "%R~"+k.Cool) {
			old = append(old, r)
		}
	}
	if len(old) != len(rules)-1 {
		t.Fatalf("the quiet keys' selector not found once in %q", rules)
	}
	user := frontier.ACLUserName(crawl, frontier.RoleSlave, "s1")
	args := []any{"ACL", "SETUSER", user}
	for _, r := range frontier.WithPassword(old, frontiertest.ACLPassword(user)) {
		args = append(args, r)
	}
	if err := srv.Root.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	dry := []any{"ACL", "DRYRUN", user, "EXISTS", k.HostPDelay, k.HostJitter, k.HostConc, k.HostDelay,
		k.RenderReady, k.Validators, k.Retry, k.Cool, k.Fresh, k.Control}
	if res, err := srv.Root.Do(ctx, dry...).Result(); err != nil || res == "OK" {
		t.Fatalf("the old rules allow the one EXISTS: %v, %v", res, err)
	}
	opt := frontier.Options{Crawl: crawl, HostConcurrency: 2, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 10000, DeadAfter: 10 * time.Second}
	_, s1, ls := aclSeedClaim(t, srv, opt)
	acked, res, err := s1.CompleteClaim(ctx, "s1", []frontier.Completion{
		{Lease: ls[0], Outcome: frontier.Done, Links: []frontier.Task{tk("http://a.test/x", 1)}},
		{Lease: ls[1], Outcome: frontier.Retry}}, 4, frontier.ClaimOptions{})
	if err != nil || len(acked) != 2 || !acked[0] || !acked[1] || len(res.Leases) != 2 {
		t.Fatalf("complete and claim: acked %v, %d leases, %v", acked, len(res.Leases), err)
	}
	if d := srv.Denials(t); len(d) > 0 {
		t.Errorf("ACL log: %v", d)
	}
}

// aclSeedClaim opens opt's crawl on srv as the master and as slave s1 (each
// with its own ACL user), seeds a.test and b.test as the master, and
// returns both with s1's leases of the two.
func aclSeedClaim(t *testing.T, srv *frontiertest.ACLRedis, opt frontier.Options) (master, s1 *frontier.Redis, ls []frontier.Lease) {
	t.Helper()
	ctx := context.Background()
	master, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleMaster, ""), opt)
	if err != nil {
		t.Fatal(err)
	}
	if s1, err = frontier.NewRedis(ctx, srv.Client(t, frontier.RoleSlave, "s1"), asSlave(opt, "s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := master.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	if ls, err = claimN(ctx, s1, "s1", 2); err != nil || len(ls) != 2 {
		t.Fatalf("s1 claim: %d leases, %v", len(ls), err)
	}
	return master, s1, ls
}
