package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// hostileEnv is a crawl whose master serves the work API and the admin
// server, with a token stolen by a hostile slave (evil) and the test's
// own honest API slave (good), both driven by hand, and a direct slave
// (honest) on the frontier itself.
type hostileEnv struct {
	cfg        *config.Config
	site       *testsite.Site
	cl         *http.Client
	base       string // the work API
	admin      string // the admin server
	evil, good string // tokens
	front      *frontier.Redis
	db         *sql.DB
	st         *store.Store
}

// newHostileEnv starts a two-host site of which only host 0 is seeded
// (the crawl's scope: the seeds' hosts), crawl.max_depth 1, and the master.
func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	ctx := context.Background()
	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 40, LinksPerPage: 5, PageBytes: 512, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg := crawltest.Config(t)
	cfg.Crawl.MaxDepth = 1
	cfg.Admin.PublicRead = true
	cfg.Lease.Duration = time.Minute
	// a host leases many pages at once: the test's hand-made slaves
	// claim what they need without waiting for politeness
	cfg.Politeness.Delay, cfg.Politeness.Jitter, cfg.Politeness.HostConcurrency = 0, 0, 100
	a := crawltest.WithAPI(t, cfg)
	res, err := masterd.Seed(ctx, cfg, site.Seeds())
	if err != nil || res.Added != 1 {
		t.Fatalf("seed: %+v %v", res, err)
	}
	e := &hostileEnv{cfg: cfg, site: site}
	e.evil = readToken(t, a.Config("evil").Slave.API.TokenFile)
	e.good = readToken(t, a.Config("good").Slave.API.TokenFile)
	e.cl = apiHTTPClient(t, a.CA())
	e.base = "https://" + cfg.API.Listen
	adminUp := make(chan string, 1)
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := masterd.New(cfg, masterd.Options{Logger: crawltest.Logger(t), AdminReady: func(addr string) { adminUp <- addr }}).Run(mctx)
		if err != nil && mctx.Err() == nil {
			t.Errorf("master: %v", err)
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	select {
	case addr := <-adminUp:
		e.admin = "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatal("the admin server did not start in 30 s")
	}
	waitAPIUp(t, e.cl, e.base)
	e.front = openFrontier(t, cfg)
	if e.db, err = sql.Open("mysql", cfg.MySQL.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close() })
	if e.st, err = store.Open(ctx, cfg.MySQL.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	return e
}

// call posts body (a value, or raw JSON as a string) to the work API as
// tok and decodes the answer into out (when 200); it returns the status.
func (e *hostileEnv) call(t *testing.T, tok, path string, body, out any) int {
	t.Helper()
	b, ok := body.(string)
	if !ok {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		b = string(j)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+path, bytes.NewBufferString(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.cl.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: decode %s: %v", path, data, err)
		}
	}
	return resp.StatusCode
}

// claim claims up to n leases as tok.
func (e *hostileEnv) claim(t *testing.T, tok string, n int) []api.Lease {
	t.Helper()
	var res api.ClaimResponse
	if code := e.call(t, tok, api.PathClaim, api.ClaimRequest{Max: n}, &res); code != http.StatusOK {
		t.Fatalf("claim: status %d", code)
	}
	return res.Leases
}

// complete completes one lease as tok with c (its lease and outcome set
// here) and returns whether it was acked.
func (e *hostileEnv) complete(t *testing.T, tok string, l api.Lease, c api.Completion) bool {
	t.Helper()
	c.Lease = api.LeaseRef{URL: l.URL, Token: l.Token, Shard: l.Shard}
	if c.Outcome == "" {
		c.Outcome = api.OutcomeDone
	}
	var res api.CompleteResponse
	if code := e.call(t, tok, api.PathComplete, api.CompleteRequest{Completions: []api.Completion{c}}, &res); code != http.StatusOK {
		t.Fatalf("complete %s: status %d", l.URL, code)
	}
	return len(res.Acked) == 1 && res.Acked[0]
}

// ev encodes a record as the API carries it.
func ev(t *testing.T, rec any) api.Event {
	t.Helper()
	typ, data, err := events.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	return api.Event{Type: typ, Data: data}
}

// drained waits until the sink has stored every event of the crawl: its
// streams hold nothing unread or unacknowledged.
func (e *hostileEnv) drained(t *testing.T) {
	t.Helper()
	rdb := e.front.Client()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		keys, err := rdb.Keys(context.Background(), "crawl:{"+e.cfg.Crawl.Name+"}:*ev").Result()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.front.Keys().Events)
		left := int64(0)
		for _, k := range keys {
			n, err := rdb.XLen(context.Background(), k).Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			left += n
		}
		if left == 0 {
			return
		}
	}
	t.Fatal("the sink did not store the crawl's events in 20 s")
}

// count runs a COUNT(*) query.
func (e *hostileEnv) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// exceptions counts the crawl's exceptions of a kind for a slave.
func (e *hostileEnv) exceptions(t *testing.T, kind, slave string) int {
	t.Helper()
	return e.count(t, "SELECT COUNT(*) FROM exceptions WHERE crawl = ? AND kind = ? AND slave_id = ?", e.cfg.Crawl.Name, kind, slave)
}

// TestHostileAPISlave: a slave of the work API whose token was stolen is
// believed only about the leases the token holds. One case per attack,
// each asserting what the crawl made of it (rows in MySQL, tasks in the
// frontier, requests to the site, targets for Prometheus), not only the
// answer's status. The cases run in turn on one crawl.
func TestHostileAPISlave(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a master")
	}
	e := newHostileEnv(t)
	crawl := e.cfg.Crawl.Name
	seedURL := e.site.Seeds()[0]
	forged := e.site.PageURL(1, 3) // host 1: no seed's, out of the crawl's scope
	now := time.Now()
	future := now.Add(4*time.Minute + 50*time.Second).UnixMilli()

	// the honest slave fetches the seed: its page, its item and its links
	// (the seed's own links to host 0's pages, at depth 1)
	var seedLease api.Lease
	for _, l := range e.claim(t, e.good, 10) {
		if l.URL == seedURL {
			seedLease = l
		}
	}
	if seedLease.URL == "" || seedLease.Depth != 0 {
		t.Fatalf("the honest slave's claim did not lease the seed %s at depth 0: %+v", seedURL, seedLease)
	}
	var links []api.Link
	for p := 1; p <= 12; p++ {
		links = append(links, api.Link{URL: e.site.PageURL(0, p), Depth: 1})
	}
	realItem := json.RawMessage(`{"name":"real"}`)
	if !e.complete(t, e.good, seedLease, api.Completion{Links: links, Events: []api.Event{
		ev(t, &events.Page{URL: seedURL, Status: 200, FetchedAt: now.UnixMilli()}),
		ev(t, &events.Item{Rule: "r", Item: "i", URL: seedURL, Data: realItem, FetchedAt: now.UnixMilli()}),
	}}) {
		t.Fatal("the honest completion of the seed was not acked")
	}

	t.Run("records of no lease through /events", func(t *testing.T) {
		code := e.call(t, e.evil, api.PathEvents, api.EventsRequest{Events: []api.Event{
			ev(t, &events.Page{URL: forged, Status: 200, ETag: `"forged"`, FetchedAt: now.UnixMilli()}),
			ev(t, &events.Item{Rule: "r", Item: "i", URL: seedURL, Data: json.RawMessage(`{"name":"forged"}`), FetchedAt: future}),
		}}, nil)
		if code != http.StatusBadRequest {
			t.Errorf("status %d, want 400", code)
		}
		// a record of no page still goes through
		if code := e.call(t, e.evil, api.PathEvents, api.EventsRequest{Events: []api.Event{
			ev(t, &events.Proxy{Proxy: "http://p:1", State: events.ProxyRetired, At: future}),
		}}, nil); code != http.StatusOK {
			t.Errorf("a proxy's state: status %d, want 200", code)
		}
	})

	// the hostile slave's own lease, at depth 1
	var own []api.Lease
	for _, l := range e.claim(t, e.evil, 3) {
		if l.Depth != 1 {
			t.Fatalf("the hostile slave leased %s at depth %d, want 1", l.URL, l.Depth)
		}
		own = append(own, l)
	}
	if len(own) < 3 {
		t.Fatalf("the hostile slave leased %d, want 3", len(own))
	}

	t.Run("records of other URLs in its lease's completion", func(t *testing.T) {
		l := own[0]
		ok := e.complete(t, e.evil, l, api.Completion{Events: []api.Event{
			ev(t, &events.Page{URL: l.URL, Status: 200, Depth: 0, FetchedAt: future}),
			ev(t, &events.Page{URL: forged, Status: 200, ETag: `"forged"`}),
			ev(t, &events.Item{Rule: "r", Item: "i", URL: seedURL, Data: json.RawMessage(`{"name":"forged"}`), FetchedAt: future}),
			ev(t, &events.Item{Rule: "r", Item: "i", URL: l.URL, Data: json.RawMessage(`{"name":"own"}`), FetchedAt: future}),
			ev(t, &events.Exception{Kind: events.KindForgedEvent, URL: l.URL, Message: "blame another"}),
			ev(t, &events.Lost{URL: seedURL, Reason: "made up"}),
		}, Links: []api.Link{{URL: e.site.PageURL(0, 30), Depth: 0}}})
		if !ok {
			t.Fatal("the completion of its own lease was not acked")
		}
	})

	t.Run("another page's content hash", func(t *testing.T) {
		// the hostile slave reports, for its lease, the content hash of a
		// page a direct slave fetches next
		const hash = 0x1234_5678_9abc_def0
		if !e.complete(t, e.evil, own[1], api.Completion{ContentHash: events.FormatChecksum(hash)}) {
			t.Fatal("not acked")
		}
		ctx := context.Background()
		res, err := e.front.ClaimWaitOpts(ctx, "honest", 1, frontier.ClaimOptions{})
		if err != nil || len(res.Leases) != 1 {
			t.Fatalf("the direct slave's claim: %+v %v", res, err)
		}
		before, err := e.front.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked, err := e.front.Complete(ctx, "honest", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done, ContentHash: hash}})
		if err != nil || len(acked) != 1 || !acked[0] {
			t.Fatalf("the direct slave's completion: %v %v", acked, err)
		}
		after, err := e.front.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Duplicates != before.Duplicates {
			t.Errorf("the direct slave's page became a duplicate (%d → %d) on the hostile slave's word",
				before.Duplicates, after.Duplicates)
		}
	})

	t.Run("a link queued at the lease's depth, not the slave's", func(t *testing.T) {
		// the link of own[0] said depth 0: at depth 2 it is past
		// crawl.max_depth 1, so nothing may lease it
		target := e.site.PageURL(0, 30)
		for range 10 {
			ls := e.claim(t, e.evil, 50)
			for _, l := range ls {
				if l.URL == target {
					t.Fatalf("%s leased at depth %d: the slave's depth 0 was believed", target, l.Depth)
				}
				e.complete(t, e.evil, l, api.Completion{Outcome: api.OutcomeRelease})
			}
			if len(ls) == 0 {
				break
			}
		}
	})

	t.Run("a metrics address that is not its own", func(t *testing.T) {
		for _, addr := range []string{"127.0.0.1:6379", "10.0.0.7:9100", "169.254.169.254:80"} {
			if code := e.call(t, e.evil, api.PathHeartbeat, api.HeartbeatRequest{Heartbeat: events.Heartbeat{MetricsAddr: addr}}, nil); code != http.StatusOK {
				t.Fatalf("heartbeat: status %d", code)
			}
			resp, err := http.Get(e.admin + "/api/v1/sd")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"evil"`) ||
				strings.Contains(string(body), strings.Split(addr, ":")[0]+":") {
				t.Errorf("metrics_addr %s: /api/v1/sd answered %d %s", addr, resp.StatusCode, body)
			}
		}
	})

	e.drained(t)

	t.Run("rows: nothing of the forged URLs, the real item kept", func(t *testing.T) {
		for _, q := range []string{"SELECT COUNT(*) FROM pages WHERE crawl = ? AND url = ?",
			"SELECT COUNT(*) FROM page_validators WHERE crawl = ? AND url = ?"} {
			if n := e.count(t, q, crawl, forged); n != 0 {
				t.Errorf("%s: %d rows for %s", q, n, forged)
			}
		}
		var data string
		var slave string
		if err := e.db.QueryRow("SELECT data, slave_id FROM items WHERE crawl = ? AND url = ?", crawl, seedURL).Scan(&data, &slave); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(data, "real") || slave != "good" {
			t.Errorf("the seed's item is %s of %s, want the honest slave's", data, slave)
		}
		// its own page and item: stored, with the master's depth and a
		// time no later than the request
		var depth int
		var fetched time.Time
		if err := e.db.QueryRow("SELECT depth, fetched_at FROM pages WHERE crawl = ? AND url = ?", crawl, own[0].URL).Scan(&depth, &fetched); err != nil {
			t.Fatalf("its own page: %v", err)
		}
		if depth != 1 || fetched.After(time.Now()) {
			t.Errorf("its own page: depth %d, fetched at %v: want the lease's depth 1 and no future time", depth, fetched)
		}
		if err := e.db.QueryRow("SELECT fetched_at FROM items WHERE crawl = ? AND url = ?", crawl, own[0].URL).Scan(&fetched); err != nil {
			t.Fatalf("its own item: %v", err)
		}
		if fetched.After(time.Now()) {
			t.Errorf("its own item is dated %v, in the future", fetched)
		}
		if n := e.count(t, "SELECT COUNT(*) FROM lost_tasks WHERE crawl = ? AND slave_id = ?", crawl, "evil"); n != 0 {
			t.Errorf("%d lost rows of the hostile slave's making", n)
		}
		if n := e.exceptions(t, events.KindForgedEvent, "evil"); n != 0 {
			t.Errorf("%d forged_event exceptions in its name (it may not record one)", n)
		}
		if n := e.exceptions(t, events.KindInvalidInput, "evil"); n == 0 {
			t.Error("no invalid_input exception records what it sent")
		}
		if n := e.count(t, "SELECT COUNT(*) FROM proxy_events WHERE crawl = ? AND slave_id = ?", crawl, "evil"); n != 1 {
			t.Errorf("%d proxy events of its own, want 1", n)
		}
	})

	t.Run("a recrawl stays in scope whatever MySQL holds", func(t *testing.T) {
		// a page row of a host out of scope, however it got there
		if err := e.st.Insert(context.Background(), []events.Envelope{{ID: "9-1", Type: events.TypePage,
			Page: &events.Page{Crawl: crawl, URL: forged, Status: 200, Slave: "evil", FetchedAt: now.UnixMilli()}}}); err != nil {
			t.Fatal(err)
		}
		e.site.ResetHits()
		n, err := masterd.Recrawl(context.Background(), e.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("the recrawl enqueued nothing")
		}
		crawltest.StartSlave(t, e.cfg, "honest-2")
		forgedHost := hostOf(forged)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			s, err := e.front.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Queued == 0 && s.InFlight == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, h := range e.site.Hits() {
			if hostOf("http://"+h.Host+"/") == forgedHost {
				t.Errorf("after the recrawl the crawler requested %s%s: a host outside the seeds'", h.Host, h.Path)
			}
		}
	})
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

var _ = fmt.Sprint
