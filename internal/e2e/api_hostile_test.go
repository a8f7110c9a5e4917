package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// TestHostileAPISlaveFlood runs a hostile slave of the work API beside two
// honest crawls (each its master, its API and its API slaves) for at least
// 30 s. It holds a token of a third crawl, its own. Over and over it tries
// another slave's lease, the honest crawls' APIs, bodies over the limit,
// forged events (another crawl, another slave, a date in 2100), a revoked
// token, and a flood of claims. Every attempt is refused, slowed or
// recorded; both honest crawls finish with every page, and their rows hold
// nothing of the hostile slave's. (A slave with a token of a crawl can
// always spoil that crawl's work, as any worker can, by failing what it
// claims: that is what revoking its token is for.)
func TestHostileAPISlaveFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two crawls for 30 s")
	}
	t.Parallel()
	ctx := context.Background()
	type crawlEnv struct {
		cfg  *config.Config
		site *testsite.Site
		api  *crawltest.APISlaves
	}
	// one MySQL holds the three crawls, as it would on one master server
	dsn := ""
	newCrawl := func(siteSeed int64, hostile bool) crawlEnv {
		site, err := testsite.Start(testsite.Options{Hosts: 4, PagesPerHost: 120, LinksPerPage: 5,
			PageBytes: 1024, Robots: true, Specials: true, Seed: siteSeed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(site.Close)
		cfg := crawltest.Config(t)
		if dsn == "" {
			dsn = cfg.MySQL.DSN
		}
		cfg.MySQL.DSN = dsn
		cfg.Politeness.Delay, cfg.Politeness.Jitter = 250*time.Millisecond, 0
		if hostile {
			// the crawl whose token the hostile slave holds runs tight limits
			cfg.API.MaxInFlight, cfg.API.Rate, cfg.API.MaxBody = 4, 20, 256<<10
		}
		crawltest.Seed(t, cfg, site)
		return crawlEnv{cfg: cfg, site: site, api: crawltest.WithAPI(t, cfg)}
	}
	a, b, own := newCrawl(41, false), newCrawl(42, false), newCrawl(43, true)
	for _, c := range []crawlEnv{a, b} {
		for i := range 2 {
			c.api.Start(fmt.Sprintf("%s-%d", c.cfg.Crawl.Name[:4], i+1))
		}
	}
	honestA := a.cfg.Crawl.Name[:4] + "-1"
	evilCfg := own.api.Config("evil")
	evilTok := readToken(t, evilCfg.Slave.API.TokenFile)
	revokedCfg := own.api.Config("gone")
	revokedTok := readToken(t, revokedCfg.Slave.API.TokenFile)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.RevokeTokens(ctx, own.cfg.Crawl.Name, "gone"); err != nil {
		t.Fatal(err)
	}
	// it trusts both masters' certificates: a refusal is the API's, not TLS's
	cl := apiHTTPClient(t, evilCfg.Slave.API.CAFile, a.api.Config("tls-probe").Slave.API.CAFile)
	baseOwn, baseA := "https://"+own.cfg.API.Listen, "https://"+a.cfg.API.Listen

	// the hostile slave's own crawl runs until the test ends: its master
	// serves the API the attacks go to
	ownCtx, stopOwn := context.WithCancel(ctx)
	ownDone := make(chan struct{})
	go func() {
		defer close(ownDone)
		if err := masterd.New(own.cfg, masterd.Options{Logger: crawltest.Logger(t)}).Run(ownCtx); err != nil && ownCtx.Err() == nil {
			t.Errorf("the master of the hostile slave's crawl: %v", err)
		}
	}()
	defer func() { stopOwn(); <-ownDone }()
	var masters sync.WaitGroup
	for _, c := range []crawlEnv{a, b} {
		masters.Add(1)
		go func() { defer masters.Done(); crawltest.RunMaster(t, c.cfg) }()
	}
	waitAPIUp(t, cl, baseOwn)
	waitAPIUp(t, cl, baseA)

	attacks := hostileAPIAttacks(own.cfg, a.cfg, a.site, honestA)
	var failures []string
	codes := map[int]int{}
	atk := startAttacks(30*time.Second, func() {
		for _, at := range attacks {
			base, tok := baseOwn, evilTok
			switch at.target {
			case "other crawl":
				base = baseA
			case "revoked":
				tok = revokedTok
			}
			code, err := apiDoErr(cl, base, tok, at.method, at.path, at.body)
			if at.target == "other crawl" && errors.Is(err, syscall.ECONNREFUSED) {
				continue // its crawl is over and its API closed
			}
			codes[code]++
			if !at.ok(code) && len(failures) < 20 {
				failures = append(failures, fmt.Sprintf("%s: status %d (%v)", at.name, code, err))
			}
		}
	})
	masters.Wait()
	rounds := atk.stop()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d rounds of %d attacks; answers by status: %v", rounds, len(attacks), codes)

	// both honest crawls whole, with nothing of the hostile slave's
	for _, c := range []crawlEnv{a, b} {
		crawltest.CheckCrawlRobots(t, c.cfg, c.site, nil, 2)
		if n, err := db.Counts(ctx, c.cfg.Crawl.Name); err != nil || n.Items != 0 {
			t.Errorf("items of crawl %s: %+v, %v; want none (the forged one refused)", c.cfg.Crawl.Name, n, err)
		}
		exc, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: c.cfg.Crawl.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range exc {
			if x.Slave == "evil" || x.Kind == events.KindForgedEvent || x.Kind == events.KindAPILimit {
				t.Errorf("crawl %s holds an exception of the hostile slave's: %+v", c.cfg.Crawl.Name, x)
			}
		}
		pages, err := db.PageURLs(ctx, c.cfg.Crawl.Name)
		if err != nil {
			t.Fatal(err)
		}
		for u := range pages {
			if strings.Contains(u, "forged.test") {
				t.Errorf("crawl %s stored %s", c.cfg.Crawl.Name, u)
			}
		}
	}
	// what it did is recorded in its own crawl, under its name (its master
	// still running: the events reach MySQL through its sink)
	var kinds map[string]int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		kinds = map[string]int{}
		excOwn, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: own.cfg.Crawl.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range excOwn {
			if x.Slave == "evil" {
				kinds[x.Kind]++
			}
		}
		if kinds[events.KindInvalidInput] > 0 && kinds[events.KindAPILimit] > 0 || time.Now().After(deadline) {
			break
		}
	}
	if kinds[events.KindInvalidInput] == 0 || kinds[events.KindAPILimit] == 0 {
		t.Errorf("the hostile slave's exceptions in its crawl by kind: %v; want invalid_input and api_limit", kinds)
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusRequestEntityTooLarge] == 0 || codes[http.StatusForbidden] == 0 ||
		codes[http.StatusBadRequest] == 0 {
		t.Errorf("answers by status %v: want 429 (the flood), 413 (the bodies), 403 (the revoked token, the other crawl) "+
			"and 400 (records of no lease)", codes)
	}
}

// hostileAPIAttack is one request of the hostile slave; ok says whether
// its answer is one the API may give it.
type hostileAPIAttack struct {
	name, target, method, path string
	body                       any
	ok                         func(code int) bool
}

func hostileAPIAttacks(own, other *config.Config, otherSite *testsite.Site, honest string) []hostileAPIAttack {
	any2xx := func(code int) bool { return code == http.StatusOK || code == http.StatusTooManyRequests }
	refused := func(want int) func(int) bool {
		return func(code int) bool { return code == want || code == http.StatusTooManyRequests }
	}
	victim := otherSite.Seeds()[0]
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	return []hostileAPIAttack{
		{name: "a flood of claims", method: http.MethodPost, path: api.PathClaim, body: api.ClaimRequest{Max: 1000}, ok: any2xx},
		{name: "ack another slave's lease", method: http.MethodPost, path: api.PathComplete, body: api.CompleteRequest{
			Completions: []api.Completion{{Lease: api.LeaseRef{URL: victim, Token: 1}, Outcome: api.OutcomeFail, Reason: "stolen"}}}, ok: any2xx},
		{name: "extend another slave's lease", method: http.MethodPost, path: api.PathExtend,
			body: api.ExtendRequest{Leases: []api.LeaseRef{{URL: victim, Token: 2}}}, ok: any2xx},
		{name: "the other crawl's API", target: "other crawl", method: http.MethodPost, path: api.PathClaim,
			body: api.ClaimRequest{Max: 1}, ok: refused(http.StatusForbidden)},
		{name: "a revoked token", target: "revoked", method: http.MethodPost, path: api.PathClaim,
			body: api.ClaimRequest{Max: 1}, ok: refused(http.StatusForbidden)},
		{name: "a body over the limit", method: http.MethodPost, path: api.PathEvents, body: api.EventsRequest{
			Events: []api.Event{{Type: events.TypeItem, Data: raw(`{"x":"` + strings.Repeat("y", 300<<10) + `"}`)}}},
			ok: refused(http.StatusRequestEntityTooLarge)},
		{name: "an item for the other crawl dated 2100", method: http.MethodPost, path: api.PathEvents, body: api.EventsRequest{
			Events: []api.Event{{Type: events.TypeItem, Data: raw(fmt.Sprintf(`{"crawl":%q,"rule":"r","item":"i","url":"http://x.test/","data":{},"slave":"evil","fetched_at":%d}`, other.Crawl.Name, future))}}},
			ok: refused(http.StatusBadRequest)},
		{name: "a page in another slave's name", method: http.MethodPost, path: api.PathEvents, body: api.EventsRequest{
			Events: []api.Event{{Type: events.TypePage, Data: raw(fmt.Sprintf(`{"crawl":%q,"url":"http://forged.test/","status":200,"slave":%q}`, own.Crawl.Name, honest))}}},
			ok: refused(http.StatusBadRequest)},
		{name: "an exception for the other crawl dated 2100", method: http.MethodPost, path: api.PathEvents, body: api.EventsRequest{
			Events: []api.Event{{Type: events.TypeException, Data: raw(fmt.Sprintf(`{"crawl":%q,"kind":"render","slave":%q,"at":%d}`, other.Crawl.Name, honest, future))}}},
			ok: any2xx},
		{name: "another crawl's slave's lease, on its API", target: "other crawl", method: http.MethodPost, path: api.PathComplete,
			body: api.CompleteRequest{Completions: []api.Completion{{Lease: api.LeaseRef{URL: victim, Token: 1}, Outcome: api.OutcomeFail}}},
			ok:   refused(http.StatusForbidden)},
		{name: "an unknown event type", method: http.MethodPost, path: api.PathEvents, body: api.EventsRequest{
			Events: []api.Event{{Type: "root", Data: raw(`{}`)}}}, ok: refused(http.StatusBadRequest)},
		{name: "a heartbeat in another slave's name", method: http.MethodPost, path: api.PathHeartbeat, body: api.HeartbeatRequest{
			Heartbeat: events.Heartbeat{Slave: honest, MetricsAddr: "169.254.169.254:80"}}, ok: any2xx},
		{name: "a claim past the cap", method: http.MethodPost, path: api.PathClaim, body: api.ClaimRequest{Max: 1 << 20}, ok: refused(http.StatusBadRequest)},
		{name: "not JSON", method: http.MethodPost, path: api.PathComplete, body: "{{{", ok: refused(http.StatusBadRequest)},
	}
}

// apiDo sends one request and returns its status (0: no answer).
func apiDo(cl *http.Client, base, tok, method, path string, body any) int {
	code, _ := apiDoErr(cl, base, tok, method, path, body)
	return code
}

// apiDoErr sends one request and returns its status, or 0 and why there
// was no answer.
func apiDoErr(cl *http.Client, base, tok, method, path string, body any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			j, _ := json.Marshal(body)
			b = string(j)
		}
		rd = bytes.NewBufferString(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func apiHTTPClient(t *testing.T, caFiles ...string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, f := range caFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// waitAPIUp waits until the work API at base answers (any status).
func waitAPIUp(t *testing.T, cl *http.Client, base string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if apiDo(cl, base, "", http.MethodGet, api.PathClaim, nil) != 0 {
			return
		}
	}
	t.Fatalf("the work API at %s did not answer in 30 s", base)
}
