package workapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	api "github.com/redcrawl/redcrawl/shared/workapi"
	"github.com/redcrawl/redcrawl/slave/workclient"
)

// tokens is a TokenStore in memory (the MySQL one: store.TokenByHash).
type tokens struct {
	mu sync.Mutex
	m  map[string]workapi.Token
}

func (ts *tokens) TokenByHash(_ context.Context, raw string) (workapi.Token, bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[raw]
	return t, ok, nil
}

func (ts *tokens) issue(t workapi.Token) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	raw := "rct_" + base64.RawURLEncoding.EncodeToString(b[:])
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]workapi.Token{}
	}
	t.ID = int64(len(ts.m) + 1)
	ts.m[raw] = t
	return raw
}

func (ts *tokens) revoke(raw string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[raw]
	t.Revoked = true
	ts.m[raw] = t
}

// hostPlanner plans a link as its own task: the URL's host, the depth and
// hops it came with (the master's real planner: masterd); known are the
// links it calls known (Planner.Known).
type hostPlanner struct{ known map[string]bool }

func (p hostPlanner) Known(u string) bool { return p.known[u] }

func (hostPlanner) Link(l api.Link) (frontier.Task, *frontier.HostPolicy, bool) {
	u, err := url.Parse(l.URL)
	if err != nil || u.Host == "" {
		return frontier.Task{}, nil, false
	}
	return frontier.NewTask(u, l.Depth, l.Hops), nil, true
}

type apiEnv struct {
	server  *workapi.Server
	handler http.Handler
	rdb     *redis.Client
	front   *frontier.Redis
	tokens  *tokens
	srv     *httptest.Server
	crawl   string
	limits  workapi.Limits
}

func newAPIEnv(t *testing.T, limits workapi.Limits, opts ...func(*workapi.Options)) *apiEnv {
	return newAPIEnvTB(t, limits, opts...)
}

func newAPIEnvTB(t testing.TB, limits workapi.Limits, opts ...func(*workapi.Options)) *apiEnv {
	t.Helper()
	u := os.Getenv("REDCRAWL_TEST_REDIS")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	crawl := testutil.CrawlName("api")
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	front, err := frontier.NewRedis(context.Background(), rdb, frontier.Options{Crawl: crawl, HostConcurrency: 2,
		LeaseDuration: time.Minute, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	e := &apiEnv{rdb: rdb, front: front, tokens: &tokens{}, crawl: crawl, limits: limits}
	log := slog.New(slog.DiscardHandler)
	o := workapi.Options{Crawl: crawl, Front: front, Tokens: e.tokens, Planner: hostPlanner{},
		Limits: limits, Library: frontier.LibraryName(), Log: log, RL: ratelog.New(log, time.Minute),
		WatchWait: 500 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	s := workapi.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.server, e.handler = s, s.Handler()
	e.srv = httptest.NewUnstartedServer(e.handler)
	e.srv.EnableHTTP2 = true
	// both, as the master's server offers them
	e.srv.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

// slave returns a client of a token issued for slave, closed when the
// test ends.
func (e *apiEnv) slave(t *testing.T, slave string) *workclient.Client {
	t.Helper()
	c, err := e.client(t, e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: slave}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// client returns a client of token with the transport a slave has
// (HTTP/1.1), trusting the test server's certificate.
func (e *apiEnv) client(t *testing.T, token string) (*workclient.Client, error) {
	t.Helper()
	return workclient.New(context.Background(), workclient.Options{URLs: []string{e.srv.URL}, Token: token,
		Crawl: e.crawl, TLS: e.clientTLS()})
}

// clientTLS trusts the test server's certificate.
func (e *apiEnv) clientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(e.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

func defaultLimits() workapi.Limits {
	return workapi.Limits{MaxInFlight: 100, Rate: 1000, MaxBody: 1 << 20, MaxLinks: 100}
}

// TestAPIRoundTrip: a slave of the API claims, acks with links and events,
// extends, beats and leaves as a direct slave does, over HTTP/1.1 as a
// slave speaks it (rawPost: the server answers HTTP/2 too).
func TestAPIRoundTrip(t *testing.T) {
	e := newAPIEnv(t, defaultLimits())
	ctx := context.Background()
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
	c, err := e.client(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Slave() != "pi1" || c.Hello().Shards != 1 {
		t.Fatalf("hello: %+v", c.Hello())
	}
	if _, err := e.front.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, events.Heartbeat{Slave: "someone-else", Host: "box"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimWaitOpts(ctx, "ignored", 10, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	l := res.Leases[0]
	if held, err := c.Extend(ctx, "pi1", res.Leases); err != nil || !held[0] {
		t.Fatalf("extend: %v, %v", held, err)
	}
	page, _ := frontier.NewEvent(&events.Page{Crawl: e.crawl, URL: l.URL, Status: 200, Slave: "pi1"})
	acked, next, err := c.CompleteClaim(ctx, "pi1", []frontier.Completion{{Lease: l, Outcome: frontier.Done,
		Links:  []frontier.Task{{URL: "http://a.test/2", Depth: 1}, {URL: "http://b.test/", Depth: 1}},
		Events: []frontier.Event{page}}}, 10, frontier.ClaimOptions{})
	if err != nil || !acked[0] || len(next.Leases) != 2 {
		t.Fatalf("complete and claim: %v, %+v, %v", acked, next, err)
	}
	// the slave's events are in its own stream, for the sink to check
	n, err := e.rdb.XLen(ctx, e.front.Keys().SlaveEvents("pi1")).Result()
	if err != nil || n == 0 {
		t.Errorf("events in pi1's stream: %d, %v", n, err)
	}
	// the registry holds the token's slave, not the body's
	slaves, err := e.front.Slaves(ctx)
	if err != nil || len(slaves) != 1 || slaves[0].Slave != "pi1" {
		t.Errorf("registry: %+v, %v", slaves, err)
	}
	if err := c.Leave(ctx, "pi1", "bye"); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.front.Stats(ctx); st.InFlight != 0 || st.Queued != 2 {
		t.Errorf("after the leave: %d in flight, %d queued; want 0 and 2", st.InFlight, st.Queued)
	}
}

// TestAPIKnownLinks: a link the planner knows (the frontier already put it
// through the seen set) is left out unplanned; the others are planned and
// queued.
func TestAPIKnownLinks(t *testing.T) {
	e := newAPIEnv(t, defaultLimits(), func(o *workapi.Options) {
		o.Planner = hostPlanner{known: map[string]bool{"http://b.test/": true}}
	})
	ctx := context.Background()
	c := e.slave(t, "pi1")
	if _, err := e.front.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimWaitOpts(ctx, "pi1", 1, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	acked, err := c.Complete(ctx, "pi1", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done,
		Links: []frontier.Task{{URL: "http://b.test/", Depth: 1}, {URL: "http://c.test/", Depth: 1}}}})
	if err != nil || !acked[0] {
		t.Fatalf("complete: %v, %v", acked, err)
	}
	next, err := c.ClaimWaitOpts(ctx, "pi1", 10, frontier.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range next.Leases {
		got = append(got, l.URL)
	}
	if len(got) != 1 || got[0] != "http://c.test/" {
		t.Errorf("queued after the completion: %v, want only http://c.test/ (b.test's link is known)", got)
	}
}

// TestAPIRefuses: tokens unknown, revoked or of another crawl, requests
// over the body, links or rate limits, and leases held past the cap.
func TestAPIRefuses(t *testing.T) {
	lim := defaultLimits()
	lim.MaxInFlight, lim.Rate, lim.MaxLinks, lim.MaxBody = 2, 20, 3, 64<<10
	e := newAPIEnv(t, lim)
	ctx := context.Background()
	var seeds []frontier.Task
	for _, h := range []string{"a", "b", "c", "d"} {
		seeds = append(seeds, frontier.Task{URL: "http://" + h + ".test/", Host: h + ".test", ScopeHost: h + ".test"})
	}
	if _, err := e.front.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client(t, "rct_"+strings.Repeat("A", 43)); !errors.Is(err, workclient.ErrToken) {
		t.Errorf("unknown token: %v", err)
	}
	other := e.tokens.issue(workapi.Token{Crawl: "another-crawl", Slave: "pi9"})
	if _, err := e.client(t, other); !errors.Is(err, workclient.ErrToken) {
		t.Errorf("another crawl's token: %v", err)
	}
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
	c, err := e.client(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimWaitOpts(ctx, "pi1", 10, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 2 {
		t.Fatalf("claim under a cap of 2: %d leases, %v", len(res.Leases), err)
	}
	if again, err := c.ClaimWaitOpts(ctx, "pi1", 10, frontier.ClaimOptions{}); err != nil || len(again.Leases) != 0 || !again.Busy {
		t.Errorf("claim at the cap: %+v, %v", again, err)
	}
	var links []frontier.Task
	for i := range 4 {
		links = append(links, frontier.Task{URL: "http://a.test/" + string(rune('a'+i)), Depth: 1})
	}
	if _, err := c.Complete(ctx, "pi1", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done, Links: links}}); err == nil ||
		!strings.Contains(err.Error(), "413") {
		t.Errorf("a completion over the links cap: %v", err)
	}
	// a body over the cap, raw
	body := `{"completions":[{"lease":{"url":"http://a.test/","token":1},"outcome":"done","reason":"` + strings.Repeat("x", 70<<10) + `"}]}`
	if code := rawPost(t, e, tok, api.PathComplete, body); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the cap: %d", code)
	}
	if code := rawPost(t, e, tok, api.PathComplete, `{"completions":[{"lease":{"url":"http://a.test/","token":1},"outcome":"steal"}]}`); code != http.StatusBadRequest {
		t.Errorf("an unknown outcome: %d", code)
	}
	if code := rawPost(t, e, tok, api.PathClaim, `{"max":1}{"max":1}`); code != http.StatusBadRequest {
		t.Errorf("two requests in a body: %d", code)
	}
	// the rate: 20 a second, bursts of 40; the raw requests get 429
	var limited int
	for range 200 {
		if rawPost(t, e, tok, api.PathClaim, `{"max":1}`) == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("200 claims in a row: none over the rate")
	}
	// what the limits did is recorded on the slave's stream
	evs, err := e.rdb.XRange(ctx, e.front.Keys().SlaveEvents("pi1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		if d, _ := ev.Values["data"].(string); strings.Contains(d, `"api_limit"`) {
			kinds = append(kinds, d)
		}
	}
	if len(kinds) < 2 {
		t.Errorf("api_limit exceptions recorded: %d (%q), want the size and the rate", len(kinds), kinds)
	}
	e.tokens.revoke(tok)
	time.Sleep(2100 * time.Millisecond) // the server's token cache
	if _, err := c.ClaimWaitOpts(ctx, "pi1", 1, frontier.ClaimOptions{}); !errors.Is(err, workclient.ErrToken) {
		t.Errorf("a revoked token: %v", err)
	}
}

func rawPost(t *testing.T, e *apiEnv, tok, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.ProtoMajor != 2 {
		t.Errorf("%s answered over HTTP/%d", path, resp.ProtoMajor)
	}
	return resp.StatusCode
}

// TestAPIWatch: a watch answers at once when the rules in force are not
// the slave's, and when work is announced to waiting slaves (a seed after
// a claim that found nothing).
func TestAPIWatch(t *testing.T) {
	e := newAPIEnv(t, defaultLimits())
	ctx := context.Background()
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
	c, err := e.client(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	msgs, stop, err := c.SubscribeRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(300 * time.Millisecond) // the watch is waiting
	if err := e.front.PutRules(ctx, "v2", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// the slave's claim finds nothing: it waits, and the seed is announced
	if res, err := c.ClaimWaitOpts(ctx, "pi1", 4, frontier.ClaimOptions{}); err != nil || len(res.Leases) != 0 {
		t.Fatalf("claim on an empty crawl: %+v, %v", res, err)
	}
	if _, err := e.front.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !got["v2"] || !got[frontier.WorkMessage] {
		select {
		case m := <-msgs:
			got[m] = true
		case <-deadline:
			t.Fatalf("watch saw %v, want v2 and %s", got, frontier.WorkMessage)
		}
	}
}

// TestAPIStopEndsWatches: Stop answers a watch waiting (nothing new), and
// a later watch at once, so that a master shutting its API down does not
// wait WatchWait for its slaves' watches.
func TestAPIStopEndsWatches(t *testing.T) {
	e := newAPIEnv(t, defaultLimits(), func(o *workapi.Options) { o.WatchWait = time.Minute })
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
	watch := func() (int, string) {
		req := httptest.NewRequest(http.MethodGet, api.PathWatch+"?rules=none", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	type answer struct {
		code int
		body string
	}
	first := make(chan answer, 1)
	go func() { c, b := watch(); first <- answer{c, b} }()
	select {
	case a := <-first:
		t.Fatalf("the watch answered before Stop: %d %s", a.code, a.body)
	case <-time.After(300 * time.Millisecond):
	}
	e.server.Stop()
	for i, ch := range []<-chan answer{first, func() <-chan answer {
		c := make(chan answer, 1)
		go func() { code, b := watch(); c <- answer{code, b} }()
		return c
	}()} {
		select {
		case a := <-ch:
			if a.code != http.StatusOK || strings.Contains(a.body, `"work":true`) {
				t.Errorf("watch %d after Stop: %d %s, want 200 with nothing new", i+1, a.code, a.body)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch %d still waits 5 s after Stop", i+1)
		}
	}
}

// FuzzAPIRequests feeds the API's request decoding random bodies on every
// path: a request is answered, never with a 500 (a body the master failed
// on) nor a panic.
func FuzzAPIRequests(f *testing.F) {
	paths := []string{api.PathClaim, api.PathComplete, api.PathExtend, api.PathHeartbeat, api.PathLeave, api.PathEvents}
	for i, body := range []string{
		`{"max":3,"render":true}`,
		`{"completions":[{"lease":{"url":"http://a.test/","token":1},"outcome":"done","links":[{"url":"http://a.test/x","depth":1}],"events":[{"type":"page","data":{"url":"http://a.test/"}}],"content_hash":"0011223344556677"}],"claim":{"max":2}}`,
		`{"leases":[{"url":"http://a.test/","token":1,"shard":0}]}`,
		`{"heartbeat":{"slave":"x","host":"h","metrics_addr":"169.254.169.254:80"}}`,
		`{"detail":"bye"}`,
		`{"events":[{"type":"item","data":{"crawl":"other"}}]}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	lim := defaultLimits()
	lim.Rate = 0 // no rate: the fuzzer's requests all reach the decoding
	e := newAPIEnvTB(f, lim)
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "fz1"})
	h := e.handler
	f.Fuzz(func(t *testing.T, p uint8, body []byte) {
		req := httptest.NewRequest(http.MethodPost, paths[int(p)%len(paths)], bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", req.URL.Path, body, w.Code, w.Body.String())
		}
	})
}

// heldCounter counts the frontier's HeldLeases calls and the leases they
// name.
type heldCounter struct {
	workapi.Frontier
	calls, leases atomic.Int64
}

func (h *heldCounter) HeldLeases(ctx context.Context, slave string, ls []frontier.Lease) ([]frontier.Lease, []bool, error) {
	h.calls.Add(1)
	h.leases.Add(int64(len(ls)))
	return h.Frontier.HeldLeases(ctx, slave, ls)
}

// TestAPIServedLeases: the completion of a lease the API served is judged
// against the claim's answer, with no read of Redis; one it did not serve
// (another master's) is read from Redis; a served lease lost since is
// refused whole by the function complete, its records and links with it.
func TestAPIServedLeases(t *testing.T) {
	hc := &heldCounter{}
	e := newAPIEnv(t, defaultLimits(), func(o *workapi.Options) { hc.Frontier = o.Front; o.Front = hc })
	ctx := context.Background()
	c := e.slave(t, "pi1")
	var seeds []frontier.Task
	for _, h := range []string{"a.test", "b.test", "c.test"} {
		seeds = append(seeds, frontier.Task{URL: "http://" + h + "/", Host: h, ScopeHost: h})
	}
	if _, err := e.front.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	done := func(l frontier.Lease, link string) frontier.Completion {
		page, _ := frontier.NewEvent(&events.Page{Crawl: e.crawl, URL: l.URL, Status: 200, Slave: "pi1"})
		return frontier.Completion{Lease: l, Outcome: frontier.Done, Events: []frontier.Event{page},
			Links: []frontier.Task{{URL: link, Depth: 1}}}
	}
	streamLen := func() int64 {
		n, err := e.rdb.XLen(ctx, e.front.Keys().SlaveEvents("pi1")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// served through the API: no read
	res, err := c.ClaimWaitOpts(ctx, "pi1", 2, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 2 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	acked, err := c.Complete(ctx, "pi1", []frontier.Completion{done(res.Leases[0], "http://a.test/2")})
	if err != nil || !acked[0] {
		t.Fatalf("complete a served lease: %v, %v", acked, err)
	}
	if n := hc.calls.Load(); n != 0 {
		t.Errorf("HeldLeases called %d times for a lease the API served, want 0", n)
	}
	if n := streamLen(); n != 1 {
		t.Errorf("events in pi1's stream after the served lease: %d, want its page", n)
	}

	// lost since it was served: the slave is declared dead, its leases
	// taken back
	if _, err := e.front.RecoverSlave(ctx, "pi1"); err != nil {
		t.Fatal(err)
	}
	acked, err = c.Complete(ctx, "pi1", []frontier.Completion{done(res.Leases[1], "http://lost.test/")})
	if err != nil || acked[0] {
		t.Fatalf("complete a lost lease: %v, %v; want it refused", acked, err)
	}
	if n := streamLen(); n != 1 {
		t.Errorf("events in pi1's stream after the lost lease: %d, want still 1", n)
	}

	// served by another master (claimed on the frontier): read from Redis
	other, err := e.front.ClaimWaitOpts(ctx, "pi1", 1, frontier.ClaimOptions{})
	if err != nil || len(other.Leases) != 1 {
		t.Fatalf("claim on the frontier: %+v, %v", other, err)
	}
	acked, err = c.Complete(ctx, "pi1", []frontier.Completion{done(other.Leases[0], "http://c.test/2")})
	if err != nil || !acked[0] {
		t.Fatalf("complete another master's lease: %v, %v", acked, err)
	}
	if n, m := hc.calls.Load(), hc.leases.Load(); n != 1 || m != 1 {
		t.Errorf("HeldLeases: %d calls for %d leases, want 1 for the lease the API did not serve", n, m)
	}
	if n := streamLen(); n != 2 {
		t.Errorf("events in pi1's stream: %d, want 2 pages", n)
	}
	// the lost lease's link was not queued; the others were
	st, err := e.front.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 3 { // b.test's seed (recovered), a.test/2, c.test/2
		t.Errorf("queued %d, want 3", st.Queued)
	}
}

// TestAPIRecordsAsTheMasterSets: a record of a lease that reads as the
// master would write it goes on byte for byte; one with a field the
// master sets otherwise (another slave, a depth the lease has not) is
// written again with the master's values.
func TestAPIRecordsAsTheMasterSets(t *testing.T) {
	e := newAPIEnv(t, defaultLimits())
	ctx := context.Background()
	c := e.slave(t, "pi1")
	if _, err := e.front.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"},
		{URL: "http://b.test/", Host: "b.test", ScopeHost: "b.test"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimWaitOpts(ctx, "pi1", 2, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 2 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	at := time.Now().UnixMilli()
	honest := &events.Page{Crawl: e.crawl, URL: res.Leases[0].URL, Status: 200, Slave: "pi1", FetchedAt: at}
	forged := &events.Page{Crawl: e.crawl, URL: res.Leases[1].URL, Status: 200, Slave: "someone", Depth: 7, FetchedAt: at}
	var sent []frontier.Event
	for i, p := range []*events.Page{honest, forged} {
		ev, err := frontier.NewEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ev)
		acked, err := c.Complete(ctx, "pi1", []frontier.Completion{{Lease: res.Leases[i], Outcome: frontier.Done, Events: []frontier.Event{ev}}})
		if err != nil || !acked[0] {
			t.Fatalf("complete %d: %v, %v", i, acked, err)
		}
	}
	entries, err := e.rdb.XRange(ctx, e.front.Keys().SlaveEvents("pi1"), "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("stream: %d entries, %v; want 2", len(entries), err)
	}
	var got []string
	for _, en := range entries {
		d, _ := en.Values["data"].(string)
		got = append(got, d)
	}
	if got[0] != string(sent[0].Data) {
		t.Errorf("the honest record was written again:\nsent %s\ngot  %s", sent[0].Data, got[0])
	}
	env, err := events.Decode("", events.TypePage, []byte(got[1]))
	if err != nil {
		t.Fatal(err)
	}
	if env.Page.Slave != "pi1" || env.Page.Depth != 0 || env.Page.URL != forged.URL {
		t.Errorf("the forged record as stored: slave %q, depth %d, url %s; want pi1, 0, %s", env.Page.Slave, env.Page.Depth, env.Page.URL, forged.URL)
	}
}
