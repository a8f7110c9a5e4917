package frontier_test

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/hashslot"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// hostileHosts are host names built to escape a crawl's hash tag or key
// space: hash tag braces, key separators, glob characters, whitespace and
// control characters, very long labels, unicode and percent-encoding.
var hostileHosts = []string{
	"a}b.example", "{a}.example", "a{b.example", "}{", "{}", "x}:q:evil.example",
	"a:b.example", "a.example:1:2", "*", "a?b.example", "[a]b.example", "a\tb.example",
	"a\nb.example", "a\r\nb.example", "a\x00b.example", "a b.example",
	strings.Repeat("l", 63) + "." + strings.Repeat("m", 200) + ".example",
	"bücher.example", "a%7Bb%7D.example", "%7B%7D", "a%3Ab.example", "a%0Ab.example", "[::1]", "[::1]:8080",
	"a/../../b", "..", "crawl:{other}:meta",
}

// keySlot is the Redis Cluster hash slot of key.
func keySlot(key string) uint16 { return uint16(hashslot.Of(key)) }

func TestKeySlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"123456789": 0x31c3, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": keySlot("foo{}{bar}"), "foo{{bar}}zap": keySlot("{bar"), "foo{bar}{zap}": keySlot("bar"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if keySlot("foo{}{bar}") != keySlot("foo{}{bar}"+"") || keySlot("foo{}{bar}") == keySlot("bar") {
		t.Error("an empty hash tag must hash the whole key")
	}
}

// hostKeys are every key built from a host name.
func hostKeys(k frontier.Keys, host string) []string {
	return []string{k.Queue(host, 0), k.Queue(host, -7), k.RenderQueue(host, 3), k.Prios(host), k.PQ(host),
		k.RenderPrios(host), k.RenderPQ(host), k.RobotsHost(host)}
}

// TestHostileHostKeys: whatever a host name holds, raw or as URL
// canonicalization leaves it, every key built from it starts with the
// crawl's prefix and lies in the crawl's hash slot.
func TestHostileHostKeys(t *testing.T) {
	canon, err := urlx.NewCanonicalizer(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, crawl := range []string{"c", "news.2026_x-1", strings.Repeat("z", 64)} {
		k := frontier.NewKeys(crawl)
		want := keySlot("crawl:{" + crawl + "}:meta")
		if keySlot(k.Prefix) != want {
			t.Fatalf("prefix %q is in slot %d, want %d", k.Prefix, keySlot(k.Prefix), want)
		}
		for _, raw := range hostileHosts {
			hosts := []string{raw}
			if u, err := canon.Canonicalize("http://" + raw + "/p"); err == nil {
				hosts = append(hosts, urlx.HostKey(u))
			}
			for _, host := range hosts {
				for _, key := range hostKeys(k, host) {
					if !strings.HasPrefix(key, k.Prefix) {
						t.Errorf("crawl %q host %q: key %q is outside %q", crawl, host, key, k.Prefix)
					}
					if s := keySlot(key); s != want {
						t.Errorf("crawl %q host %q: key %q in slot %d, want the crawl's %d", crawl, host, key, s, want)
					}
				}
			}
		}
	}
}

// TestHostileHostsCanonical records what URL canonicalization makes of
// hostile host names: nothing that reaches the frontier as a host key holds
// a brace, whitespace, a control character or a glob character.
func TestHostileHostsCanonical(t *testing.T) {
	canon, err := urlx.NewCanonicalizer(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, raw := range hostileHosts {
		u, err := canon.Canonicalize("http://" + raw + "/p")
		if err != nil {
			got[raw] = "rejected"
			continue
		}
		host := urlx.HostKey(u)
		got[raw] = host
		if strings.ContainsAny(host, "{}*?\t\n\r\x00 %/\\") {
			t.Errorf("host %q canonicalizes to host key %q", raw, host)
		}
	}
	want := map[string]string{
		"a}b.example": "rejected", "{a}.example": "rejected", "a{b.example": "rejected", "}{": "rejected",
		"{}": "rejected", "x}:q:evil.example": "rejected", "a:b.example": "rejected", "a.example:1:2": "rejected",
		"*": "rejected", "a?b.example": "a", "[a]b.example": "rejected", "a\tb.example": "ab.example", // a?b: the rest is the query
		"a\nb.example": "ab.example", "a\r\nb.example": "ab.example", "a\x00b.example": "rejected",
		"a b.example": "rejected",
		// A label longer than DNS allows is kept: it only fails to resolve.
		strings.Repeat("l", 63) + "." + strings.Repeat("m", 200) + ".example": strings.Repeat("l", 63) + "." + strings.Repeat("m", 200) + ".example",
		"bücher.example": "xn--bcher-kva.example", "a%7Bb%7D.example": "rejected", "%7B%7D": "rejected",
		"a%3Ab.example": "rejected", "a%0Ab.example": "rejected", "[::1]": "[::1]", "[::1]:8080": "[::1]:8080",
		"a/../../b": "a", "..": "rejected", "crawl:{other}:meta": "rejected",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("canonical host keys (-want +got):\n%s", d)
	}
}

// TestHostileHostsInRedis runs tasks of hostile hosts (raw, as a careless
// caller might pass them) through the real functions: seed, claim, retry,
// fail, robots, and checks with SCAN that every key the crawl created
// starts with its prefix. The functions take a task whose host is its
// URL's authority, whatever it holds; a task whose host is not (a host
// with a / ? # or @ cannot be one) is refused and counted.
func TestHostileHostsInRedis(t *testing.T) {
	ctx := context.Background()
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "hostile", func(o *frontier.Options) { o.HostConcurrency = 100; o.MaxAttempts = 2 })
	k := f.Keys()
	// A unique marker in every host finds the keys the scripts made
	// wherever they are.
	marker := strings.TrimPrefix(k.Prefix, "crawl:{")
	marker = "m" + strings.TrimSuffix(marker, "}:")
	var tasks, refused []frontier.Task
	for i, h := range hostileHosts {
		host := fmt.Sprintf("%s%d-%s", marker, i, h)
		tasks = append(tasks, frontier.Task{URL: "http://" + host + "/" + url.PathEscape(h),
			Host: host, ScopeHost: host, Priority: int64(i % 3)})
		if strings.ContainsAny(host, "/?#@") {
			refused = append(refused, tasks[i])
		}
	}
	// a host that is not its URL's
	refused = append(refused, frontier.Task{URL: "http://" + marker + "-elsewhere.example/",
		Host: marker + "-x}:q:evil.example", ScopeHost: marker + "-elsewhere.example"})
	n, err := f.Seed(ctx, append(tasks, refused[len(refused)-1]))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(tasks) - len(refused) + 1; n != want {
		t.Fatalf("seeded %d of %d, want %d", n, len(tasks)+1, want)
	}
	if st, err := rdb.HGet(ctx, k.Stats, "refused").Int(); err != nil || st != len(refused) {
		t.Errorf("refused %d, %v; want %d", st, err, len(refused))
	}
	accepted := tasks[:0:0]
	for _, task := range tasks {
		if !strings.ContainsAny(task.Host, "/?#@") {
			accepted = append(accepted, task)
		}
	}
	tasks = accepted
	for i, task := range tasks {
		if err := f.PutRobots(ctx, task.Host, frontier.RobotsRecord{FetchedAt: time.Now(), Status: 200, Body: []byte("x")}); err != nil {
			t.Fatalf("robots of host %d: %v", i, err)
		}
	}
	var claimed int
	for round := 0; round < 10 && claimed < len(tasks); round++ {
		ls, err := claimN(ctx, f, "s1", len(tasks))
		if err != nil {
			t.Fatal(err)
		}
		claimed += len(ls)
		var cs []frontier.Completion
		for j, l := range ls {
			o := frontier.Retry
			if j%2 == 0 {
				o = frontier.Fail
			}
			cs = append(cs, frontier.Completion{Lease: l, Outcome: o, Reason: "hostile " + l.Host})
		}
		if _, err := f.Complete(ctx, "s1", cs); err != nil {
			t.Fatal(err)
		}
	}
	if claimed != len(tasks) {
		t.Errorf("claimed %d of %d tasks", claimed, len(tasks))
	}

	var outside, inside []string
	iter := rdb.Scan(ctx, 0, "*"+marker+"*", 1000).Iterator()
	for i := 0; iter.Next(ctx) && i < 100000; i++ {
		key := iter.Val()
		if strings.HasPrefix(key, k.Prefix) {
			inside = append(inside, key)
		} else {
			outside = append(outside, key)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(outside)
	if len(outside) > 0 {
		t.Errorf("keys outside %q: %q", k.Prefix, outside)
	}
	if len(inside) < len(tasks) {
		t.Errorf("only %d keys of hostile hosts under the prefix, want at least %d (robots): %q", len(inside), len(tasks), inside)
	}
	for _, key := range inside {
		if s, want := keySlot(key), keySlot(k.Meta); s != want {
			t.Errorf("key %q in slot %d, want %d", key, s, want)
		}
		// Redis agrees on the slot.
		got, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err == nil && uint16(got) != keySlot(key) {
			t.Errorf("CLUSTER KEYSLOT %q = %d, the test computes %d", key, got, keySlot(key))
		}
	}
}
