package dnscache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/slave/netguard"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rec is how the test server answers a name.
type rec struct {
	a, aaaa  []string
	ttl      uint32 // TTL of the A records
	aaaaTTL  uint32 // TTL of the AAAA records (0: ttl)
	rcode    int    // non-zero: answer with this rcode
	block    bool   // never answer (until the test ends)
	truncate bool   // over UDP, answer truncated and empty
	hook     func() // called on each query of the name
}

// server is a DNS server on 127.0.0.1 (UDP and TCP on one port) that
// counts the queries it receives per name and type.
type server struct {
	addr    string
	zone    map[string]rec
	stuck   atomic.Bool   // when set, every query blocks until the test ends
	release chan struct{} // closed when the test ends

	mu     sync.Mutex
	counts map[string]int // "name/TYPE/net" -> queries
}

func newServer(t testing.TB, zone map[string]rec) *server {
	t.Helper()
	s := &server{zone: zone, release: make(chan struct{}), counts: map[string]int{}}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 { // find a port free for both UDP and TCP
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen udp: %v", err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("listen tcp: %v", err)
	}
	s.addr = pc.LocalAddr().String()
	var wg sync.WaitGroup
	servers := []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil {
				t.Errorf("dns server: %v", err)
			}
		})
		<-started
	}
	t.Cleanup(func() {
		for _, srv := range servers {
			if err := srv.Shutdown(); err != nil {
				t.Errorf("shutdown dns server: %v", err)
			}
		}
		wg.Wait()
	})
	t.Cleanup(func() { close(s.release) }) // runs first: unblocks handlers
	return s
}

// ServeDNS implements dns.Handler.
func (s *server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
	network := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	s.mu.Lock()
	s.counts[fmt.Sprintf("%s/%s/%s", name, dns.TypeToString[q.Qtype], network)]++
	s.mu.Unlock()

	rc, ok := s.zone[name]
	if rc.hook != nil {
		rc.hook()
	}
	if rc.block || s.stuck.Load() {
		<-s.release
		return
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	switch {
	case !ok:
		resp.Rcode = dns.RcodeNameError
	case rc.rcode != 0:
		resp.Rcode = rc.rcode
	case rc.truncate && network == "udp":
		resp.Truncated = true
	case q.Qtype == dns.TypeA:
		for _, a := range rc.a {
			resp.Answer = append(resp.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: rc.ttl},
				A:   net.ParseIP(a),
			})
		}
	case q.Qtype == dns.TypeAAAA:
		ttl := rc.aaaaTTL
		if ttl == 0 {
			ttl = rc.ttl
		}
		for _, a := range rc.aaaa {
			resp.Answer = append(resp.Answer, &dns.AAAA{
				Hdr:  dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl},
				AAAA: net.ParseIP(a),
			})
		}
	}
	_ = w.WriteMsg(resp)
}

// count returns the queries of name and type received over network.
func (s *server) count(name string, qtype uint16, network string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[fmt.Sprintf("%s/%s/%s", name, dns.TypeToString[qtype], network)]
}

// queries returns the A queries of name received over UDP: one per
// resolution (each sends one A and one AAAA query).
func (s *server) queries(name string) int { return s.count(name, dns.TypeA, "udp") }

func (s *server) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

func newResolver(t testing.TB, opt Options) *Resolver {
	t.Helper()
	r, err := New(opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// waitFor polls cond, at most 2000 times over at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// cmpAddr compares netip.Addr values, whose fields are unexported.
var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestCoalescingAndTTL(t *testing.T) {
	gate := make(chan struct{}) // holds the first resolution until every lookup waits
	srv := newServer(t, map[string]rec{
		"a.test": {a: []string{"127.0.0.1", "127.0.0.2"}, aaaa: []string{"::1"}, ttl: 60, hook: func() { <-gate }},
	})
	openGate := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(openGate) // before the server's shutdown, if the test fails early
	clk := newClock()
	r := newResolver(t, Options{Server: srv.addr, Now: clk.Now})
	ctx := context.Background()
	want := addrs("127.0.0.1", "127.0.0.2", "::1")

	const n = 50
	var wg sync.WaitGroup
	results := make([][]netip.Addr, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = r.LookupIP(ctx, "A.test.") })
	}
	waitFor(t, "every lookup to miss", func() bool { return r.Stats().Misses == n })
	openGate()
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("lookup %d: %v", i, errs[i])
		}
		if d := cmp.Diff(want, results[i], cmpAddr); d != "" {
			t.Fatalf("lookup %d (-want +got):\n%s", i, d)
		}
	}
	if got := srv.count("a.test", dns.TypeA, "udp") + srv.count("a.test", dns.TypeAAAA, "udp"); got != 2 {
		t.Fatalf("%d concurrent lookups sent %d queries, want 2 (one A, one AAAA)", n, got)
	}

	steps := []struct {
		advance     time.Duration
		wantQueries int
	}{
		{59 * time.Second, 1}, // still within the TTL
		{2 * time.Second, 2},  // expired: resolved again
		{30 * time.Second, 2}, // the new answer is cached
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		got, err := r.LookupIP(ctx, "a.test")
		if err != nil {
			t.Fatalf("after %v: %v", st.advance, err)
		}
		if d := cmp.Diff(want, got, cmpAddr); d != "" {
			t.Fatalf("after %v (-want +got):\n%s", st.advance, d)
		}
		if q := srv.queries("a.test"); q != st.wantQueries {
			t.Fatalf("after %v: %d resolutions, want %d", st.advance, q, st.wantQueries)
		}
	}
	st := r.Stats()
	if st.Queries != 2 || st.Hits != 2 || st.Misses != n+1 || st.Positive != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTTLClamping(t *testing.T) {
	tests := []struct {
		name         string
		rec          rec
		minTTL, maxT time.Duration
		wantTTL      time.Duration
	}{
		{"below default MinTTL", rec{a: []string{"127.0.0.1"}, ttl: 5}, 0, 0, 30 * time.Second},
		{"above default MaxTTL", rec{a: []string{"127.0.0.1"}, ttl: 7200}, 0, 0, time.Hour},
		{"inside the defaults", rec{a: []string{"127.0.0.1"}, ttl: 100}, 0, 0, 100 * time.Second},
		{"zero TTL", rec{a: []string{"127.0.0.1"}, ttl: 0}, 0, 0, 30 * time.Second},
		{"custom bounds, inside", rec{a: []string{"127.0.0.1"}, ttl: 15}, 10 * time.Second, 20 * time.Second, 15 * time.Second},
		{"custom bounds, above", rec{a: []string{"127.0.0.1"}, ttl: 50}, 10 * time.Second, 20 * time.Second, 20 * time.Second},
		{"smallest record TTL", rec{a: []string{"127.0.0.1"}, aaaa: []string{"::1"}, ttl: 300, aaaaTTL: 100}, 0, 0, 100 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, map[string]rec{"h.test": tt.rec})
			clk := newClock()
			r := newResolver(t, Options{Server: srv.addr, Now: clk.Now, MinTTL: tt.minTTL, MaxTTL: tt.maxT})
			var got []int
			for _, at := range []time.Duration{0, tt.wantTTL - time.Second, 2 * time.Second} {
				clk.Advance(at)
				if _, err := r.LookupIP(context.Background(), "h.test"); err != nil {
					t.Fatal(err)
				}
				got = append(got, srv.queries("h.test"))
			}
			if d := cmp.Diff([]int{1, 1, 2}, got); d != "" {
				t.Fatalf("resolutions at 0, TTL-1s, TTL+1s (-want +got):\n%s", d)
			}
		})
	}
}

func TestNegativeCache(t *testing.T) {
	tests := []struct {
		name                                     string
		host                                     string
		timeout                                  time.Duration
		wantNotFound, wantTimeout, wantTemporary bool
	}{
		{name: "NXDOMAIN", host: "nx.test", wantNotFound: true},
		{name: "no records", host: "nodata.test", wantNotFound: true},
		{name: "SERVFAIL", host: "servfail.test", wantTemporary: true},
		{name: "timeout", host: "stuck.test", timeout: 100 * time.Millisecond, wantTimeout: true, wantTemporary: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, map[string]rec{
				"nodata.test":   {},
				"servfail.test": {rcode: dns.RcodeServerFailure},
				"stuck.test":    {block: true},
			})
			clk := newClock()
			r := newResolver(t, Options{Server: srv.addr, Now: clk.Now, Timeout: tt.timeout})
			type result struct {
				NotFound, Timeout, Temporary bool
				Queries                      int
			}
			want := result{tt.wantNotFound, tt.wantTimeout, tt.wantTemporary, 1}
			for i, advance := range []time.Duration{0, 0, 59 * time.Second, 2 * time.Second} {
				clk.Advance(advance)
				got, err := r.LookupIP(context.Background(), tt.host)
				var de *net.DNSError
				if !errors.As(err, &de) {
					t.Fatalf("lookup %d: got %v, %v; want a *net.DNSError", i, got, err)
				}
				if i == 3 {
					want.Queries = 2 // the negative TTL (1m) expired
				}
				res := result{de.IsNotFound, de.IsTimeout, de.IsTemporary, srv.queries(tt.host)}
				if d := cmp.Diff(want, res); d != "" {
					t.Fatalf("lookup %d (-want +got):\n%s", i, d)
				}
			}
			if st := r.Stats(); st.NegativeHits != 2 || st.Negative != 1 || st.Positive != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestSlowHost(t *testing.T) {
	clk := newClock()
	srv := newServer(t, map[string]rec{
		// Each query takes 3s on the test clock: slower than SlowThreshold.
		"slow.test": {a: []string{"127.0.0.1"}, ttl: 600, hook: func() { clk.Advance(3 * time.Second) }},
		"fast.test": {a: []string{"127.0.0.2"}, ttl: 600},
	})
	r := newResolver(t, Options{Server: srv.addr, Now: clk.Now})
	ctx := context.Background()
	for _, h := range []string{"slow.test", "fast.test"} {
		if _, err := r.LookupIP(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	type state struct {
		SlowMarked, FastMarked bool
		Addrs                  []netip.Addr
		Queries                int
	}
	check := func(when string, want state) {
		t.Helper()
		got, err := r.LookupIP(ctx, "slow.test")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		s := state{r.Slow("slow.test"), r.Slow("fast.test"), got, srv.queries("slow.test")}
		if d := cmp.Diff(want, s, cmpAddr); d != "" {
			t.Fatalf("%s (-want +got):\n%s", when, d)
		}
	}
	check("cached", state{true, false, addrs("127.0.0.1"), 1})
	st := r.Stats()
	if st.Slow != 1 || st.Negative != 1 || st.Positive != 1 || st.NegativeHits != 0 {
		t.Fatalf("stats %+v", st)
	}
	clk.Advance(61 * time.Second) // past NegativeTTL, well within the record's 600s
	check("after NegativeTTL", state{true, false, addrs("127.0.0.1"), 2})
}

func TestPrefetchWhileStuck(t *testing.T) {
	zone := map[string]rec{}
	var hosts []string
	for i := range 10 {
		h := fmt.Sprintf("p%d.test", i)
		zone[h] = rec{a: []string{fmt.Sprintf("127.0.1.%d", i)}, ttl: 300}
		hosts = append(hosts, h)
	}
	srv := newServer(t, zone)
	clk := newClock()
	r := newResolver(t, Options{Server: srv.addr, Now: clk.Now, MaxPending: 8, MaxWorkers: 2})
	ctx := context.Background()

	// Duplicates, other spellings, IP literals and localhost are skipped.
	r.Prefetch(append([]string{"127.0.0.1", "localhost", "P0.TEST.", "p0.test"}, hosts[:5]...))
	waitFor(t, "the first prefetch", func() bool { return r.Stats().Positive == 5 })
	r.Prefetch(hosts) // the first five are cached now
	waitFor(t, "the second prefetch", func() bool { return r.Stats().Positive == 10 })
	st := r.Stats()
	if st.Prefetched != 10 || st.Dropped != 0 || st.Queries != 10 {
		t.Fatalf("stats after prefetch %+v", st)
	}

	srv.stuck.Store(true)
	for i, h := range hosts {
		got, err := r.LookupIP(ctx, h)
		if err != nil {
			t.Fatalf("lookup %s while stuck: %v", h, err)
		}
		if d := cmp.Diff(addrs(fmt.Sprintf("127.0.1.%d", i)), got, cmpAddr); d != "" {
			t.Fatalf("lookup %s (-want +got):\n%s", h, d)
		}
		if q := srv.queries(h); q != 1 {
			t.Fatalf("%s: %d resolutions, want 1", h, q)
		}
	}

	// The server really is stuck: a name not cached gets no answer.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := r.LookupIP(tctx, "other.test")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lookup of an uncached name on a stuck server: %v, want a deadline error", err)
	}

	// Prefetch does not block on a stuck server; the queue overflows.
	var more []string
	for i := range 20 {
		more = append(more, fmt.Sprintf("q%d.test", i))
	}
	r.Prefetch(more)
	if got := r.Stats().Dropped; got != 20-8 {
		t.Fatalf("dropped %d names, want %d", got, 20-8)
	}
	// Prefetched hosts are still answered from the cache.
	if _, err := r.LookupIP(ctx, hosts[0]); err != nil {
		t.Fatalf("lookup while prefetch workers are stuck: %v", err)
	}
	r.Close() // cancels the stuck queries and waits for the workers
	if _, err := r.LookupIP(ctx, hosts[1]); err != nil {
		t.Fatalf("cached lookup after Close: %v", err)
	}
	if _, err := r.LookupIP(ctx, "q0.test"); !errors.Is(err, ErrClosed) {
		t.Fatalf("uncached lookup after Close: %v, want ErrClosed", err)
	}
}

func TestEvictionLowestWeight(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type spec struct {
		host string
		took time.Duration
		ttl  time.Duration // remaining
		idle time.Duration
	}
	base := func(host string) spec { return spec{host, 10 * time.Millisecond, time.Minute, 0} }
	tests := []struct {
		name        string
		entries     []spec
		wantEvicted string
	}{
		{"expired first", []spec{base("a"), {"b", time.Second, -time.Second, 0}, base("c")}, "b"},
		{"fastest resolve", []spec{base("a"), {"b", time.Millisecond, time.Minute, 0}, base("c")}, "b"},
		{"shortest remaining TTL", []spec{base("a"), base("b"), {"c", 10 * time.Millisecond, 10 * time.Second, 0}}, "c"},
		{"longest idle", []spec{{"a", 10 * time.Millisecond, time.Minute, 10 * time.Minute}, base("b"), base("c")}, "a"},
		{"slow resolve outweighs idle", []spec{{"a", time.Second, time.Minute, 10 * time.Minute}, base("b"), base("c")}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(len(tt.entries))
			put := func(s spec) int {
				e := &entry{host: s.host, took: s.took, expires: now.Add(s.ttl)}
				e.lastAccess.Store(now.Add(-s.idle).UnixNano())
				return c.put(e, now)
			}
			for _, s := range tt.entries {
				if n := put(s); n != 0 {
					t.Fatalf("evicted %d before the cache was full", n)
				}
			}
			if n := put(base("new")); n != 1 {
				t.Fatalf("evicted %d, want 1", n)
			}
			var left []string
			for _, s := range append(tt.entries, base("new")) {
				if c.m[s.host] != nil {
					left = append(left, s.host)
				} else if s.host != tt.wantEvicted {
					t.Errorf("evicted %s, want %s", s.host, tt.wantEvicted)
				}
			}
			if len(left) != len(tt.entries) || c.len() != len(tt.entries) {
				t.Fatalf("left %v, len %d", left, c.len())
			}
		})
	}
}

func TestEvictionSampledKeepsBound(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newCache(100)
	evicted := 0
	for i := range 500 {
		e := &entry{host: fmt.Sprintf("h%d", i), expires: now.Add(time.Minute)}
		e.lastAccess.Store(now.UnixNano())
		evicted += c.put(e, now)
	}
	if evicted != 400 || c.len() != 100 || len(c.m) != 100 {
		t.Fatalf("evicted %d, len %d, map %d", evicted, c.len(), len(c.m))
	}
	for i, e := range c.list {
		if e.idx != i || c.m[e.host] != e {
			t.Fatalf("entry %d (%s) out of place", i, e.host)
		}
	}
}

func TestEvictionThroughResolver(t *testing.T) {
	srv := newServer(t, map[string]rec{
		"a.test": {a: []string{"127.0.0.1"}, ttl: 60},
		"b.test": {a: []string{"127.0.0.2"}, ttl: 60},
		"c.test": {a: []string{"127.0.0.3"}, ttl: 60},
	})
	clk := newClock()
	r := newResolver(t, Options{Server: srv.addr, Now: clk.Now, MaxEntries: 2})
	ctx := context.Background()
	lookup := func(h string) {
		t.Helper()
		if _, err := r.LookupIP(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	lookup("a.test")
	lookup("b.test")
	clk.Advance(10 * time.Second)
	lookup("a.test") // a is the more recently used
	clk.Advance(10 * time.Second)
	lookup("c.test") // evicts b
	lookup("a.test")
	lookup("c.test")
	got := []int{srv.queries("a.test"), srv.queries("b.test"), srv.queries("c.test")}
	if d := cmp.Diff([]int{1, 1, 1}, got); d != "" {
		t.Fatalf("resolutions of a, b, c (-want +got):\n%s", d)
	}
	lookup("b.test")
	if q := srv.queries("b.test"); q != 2 {
		t.Fatalf("b resolved %d times, want 2 (it was evicted)", q)
	}
	if st := r.Stats(); st.Evictions != 2 || st.Positive != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestIPLiteralsAndLocalNames(t *testing.T) {
	srv := newServer(t, nil)
	r := newResolver(t, Options{Server: srv.addr})
	tests := []struct {
		host string
		want []netip.Addr
	}{
		{"127.0.0.1", addrs("127.0.0.1")},
		{"::1", addrs("::1")},
		{"[::1]", addrs("::1")},
		{"::ffff:127.0.0.1", addrs("::ffff:127.0.0.1")},
		{"2001:db8::1", addrs("2001:db8::1")},
	}
	for _, tt := range tests {
		got, err := r.LookupIP(context.Background(), tt.host)
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		if d := cmp.Diff(tt.want, got, cmpAddr); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.host, d)
		}
	}
	// localhost goes to the system resolver (the hosts file), uncached.
	got, err := r.LookupIP(context.Background(), "localhost")
	if err != nil {
		t.Fatalf("localhost: %v", err)
	}
	found := false
	for _, a := range got {
		found = found || a.IsLoopback()
	}
	if !found {
		t.Fatalf("localhost resolved to %v, want a loopback address", got)
	}
	if _, err := r.LookupIP(context.Background(), "bad..name"); err == nil {
		t.Fatal("invalid name resolved")
	}
	if st := r.Stats(); st.Queries != 0 || st.Positive+st.Negative != 0 || srv.total() != 0 {
		t.Fatalf("stats %+v, server queries %d; want no query and nothing cached", st, srv.total())
	}
}

func TestSystemResolver(t *testing.T) {
	r := newResolver(t, Options{HostsFile: "/nonexistent/hosts"})
	got, err := r.LookupIP(context.Background(), "localhost")
	if err != nil || len(got) == 0 {
		t.Fatalf("localhost: %v, %v", got, err)
	}
	if st := r.Stats(); st.Queries != 0 || st.Positive != 0 {
		t.Fatalf("stats %+v: localhost was cached", st)
	}
}

func TestParseHosts(t *testing.T) {
	const file = `# comment
127.0.0.1	localhost
::1 ip6-localhost ip6-loopback # trailing comment
10.0.0.7 Build.Example.  build
not-an-ip name.test
192.0.2.1
`
	got, err := parseHosts(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"localhost": true, "ip6-localhost": true, "ip6-loopback": true, "build.example": true, "build": true}
	if d := cmp.Diff(want, got, cmpAddr); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestTruncatedFallsBackToTCP(t *testing.T) {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("127.0.2.%d", i+1))
	}
	srv := newServer(t, map[string]rec{"big.test": {a: many, ttl: 300, truncate: true}})
	r := newResolver(t, Options{Server: srv.addr})
	got, err := r.LookupIP(context.Background(), "big.test")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(addrs(many...), got, cmpAddr); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if u, c := srv.count("big.test", dns.TypeA, "udp"), srv.count("big.test", dns.TypeA, "tcp"); u != 1 || c != 1 {
		t.Fatalf("A queries: %d over UDP, %d over TCP; want 1 and 1", u, c)
	}
}

func TestDialContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Go(func() {
		for range 10 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(c, c) // echo
			c.Close()
		}
	})
	port := ln.Addr().(*net.TCPAddr).Port

	srv := newServer(t, map[string]rec{
		"dial.test":  {a: []string{"127.0.0.1"}, ttl: 300},
		"multi.test": {a: []string{"127.0.0.9", "127.0.0.1"}, ttl: 300},
		"v4.test":    {a: []string{"127.0.0.1"}, ttl: 300},
	})
	r := newResolver(t, Options{Server: srv.addr})
	var d net.Dialer
	var mu sync.Mutex
	var dialed []string
	dial := r.DialContext(func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		if strings.HasPrefix(addr, "127.0.0.9:") {
			return nil, errors.New("test: refused")
		}
		return d.DialContext(ctx, network, addr)
	})
	tests := []struct {
		name, network, host string
		wantDialed          []string
		wantErr             bool
	}{
		{"one address", "tcp", "dial.test", []string{fmt.Sprintf("127.0.0.1:%d", port)}, false},
		{"tries in order", "tcp", "multi.test", []string{fmt.Sprintf("127.0.0.9:%d", port), fmt.Sprintf("127.0.0.1:%d", port)}, false},
		{"no address of the family", "tcp6", "v4.test", nil, true},
		{"unknown host", "tcp", "nx.test", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			dialed = nil
			mu.Unlock()
			conn, err := dial(context.Background(), tt.network, net.JoinHostPort(tt.host, fmt.Sprint(port)))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if conn != nil {
				if _, err := conn.Write([]byte("ping")); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4)
				if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
					t.Fatalf("echo: %q, %v", buf, err)
				}
				conn.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if d := cmp.Diff(tt.wantDialed, dialed); d != "" {
				t.Fatalf("dialed (-want +got):\n%s", d)
			}
		})
	}

	// A netguard dialer still refuses the loopback address the name
	// resolves to.
	guarded := r.DialContext(netguard.Dialer(time.Second, false).DialContext)
	_, err = guarded(context.Background(), "tcp", net.JoinHostPort("dial.test", fmt.Sprint(port)))
	var be *netguard.BlockedError
	if !errors.As(err, &be) {
		t.Fatalf("guarded dial: %v, want a *netguard.BlockedError", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Options
	}{
		{"server without port", Options{Server: "127.0.0.1"}},
		{"negative TTL", Options{NegativeTTL: -time.Second}},
		{"MinTTL above MaxTTL", Options{MinTTL: time.Hour, MaxTTL: time.Minute}},
		{"negative MaxEntries", Options{MaxEntries: -1}},
	}
	for _, tt := range tests {
		if r, err := New(tt.opt); err == nil {
			r.Close()
			t.Errorf("%s: New accepted %+v", tt.name, tt.opt)
		}
	}
}

func BenchmarkLookupHit(b *testing.B) {
	srv := newServer(b, map[string]rec{"bench.test": {a: []string{"127.0.0.1"}, aaaa: []string{"::1"}, ttl: 3600}})
	r := newResolver(b, Options{Server: srv.addr})
	ctx := context.Background()
	if _, err := r.LookupIP(ctx, "bench.test"); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.LookupIP(ctx, "bench.test"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.LookupIP(ctx, "bench.test"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
