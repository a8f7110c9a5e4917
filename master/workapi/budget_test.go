package workapi_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// gatedFront holds every claim until gate is closed: requests that stay
// in flight as long as a test wants.
type gatedFront struct {
	workapi.Frontier
	gate    chan struct{}
	waiting sync.WaitGroup
}

func (g *gatedFront) ClaimWaitOpts(ctx context.Context, slave string, max int, opts frontier.ClaimOptions) (frontier.ClaimResult, error) {
	g.waiting.Done()
	<-g.gate
	return g.Frontier.ClaimWaitOpts(ctx, slave, max, opts)
}

// post sends a request with a body and returns its status and
// Retry-After header.
func post(t *testing.T, e *apiEnv, tok, path string, body []byte, length bool) (int, string) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if !length {
		rd = io.MultiReader(bytes.NewReader(body)) // no length known: chunked
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, rd)
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
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestAPIBudgets: what bounds the master's work for a token and for all of
// them: a body must say its length; a token has at most 16 requests at
// once; bodies share a decode budget (a request that finds no room in 2 s
// is answered 503), small ones a lane of their own; a token's events are
// bounded in bytes a second and by what its stream holds unread (429 with
// Retry-After); a body's records are counted as it is decoded (413 at the
// first one too many).
func TestAPIBudgets(t *testing.T) {
	t.Run("a body without a length", func(t *testing.T) {
		e := newAPIEnv(t, defaultLimits())
		tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
		if code, _ := post(t, e, tok, api.PathClaim, []byte(`{"max":1}`), false); code != http.StatusLengthRequired {
			t.Errorf("status %d, want 411", code)
		}
	})
	t.Run("requests at once and the decode budget", func(t *testing.T) {
		lim := defaultLimits()
		lim.MaxBody, lim.DecodeBudget = 320<<10, 320<<10
		g := &gatedFront{gate: make(chan struct{})}
		e := newAPIEnv(t, lim, func(o *workapi.Options) { g.Frontier = o.Front; o.Front = g })
		tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
		// 16 claims held in flight: the first, a body of 300 KiB, takes
		// the budget, the second of that size waits for it; bodies of up
		// to 256 KiB have a lane of their own, a quarter of the budget
		// more (at least 256 KiB), and pass
		pad := `{"max":1,"pad":"` + strings.Repeat("x", 300<<10) + `"}`
		medium := `{"max":1,"pad":"` + strings.Repeat("x", 100<<10) + `"}`
		small := `{"max":1}`
		g.waiting.Add(1)
		codes := make(chan int, 20)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); c, _ := post(t, e, tok, api.PathClaim, []byte(pad), true); codes <- c }()
		g.waiting.Wait()
		start := time.Now()
		code, retry := post(t, e, tok, api.PathClaim, []byte(pad), true)
		if code != http.StatusServiceUnavailable || retry == "" || time.Since(start) < time.Second {
			t.Errorf("a body with the budget taken: %d after %v (Retry-After %q), want 503 after 2 s", code, time.Since(start), retry)
		}
		g.waiting.Add(15)
		for i := range 15 {
			body := small
			if i == 0 {
				body = medium
			}
			wg.Add(1)
			go func() { defer wg.Done(); c, _ := post(t, e, tok, api.PathClaim, []byte(body), true); codes <- c }()
		}
		g.waiting.Wait()
		if code, retry := post(t, e, tok, api.PathClaim, []byte(small), true); code != http.StatusTooManyRequests || retry == "" {
			t.Errorf("a 17th request at once: %d (Retry-After %q), want 429", code, retry)
		}
		other := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi2"})
		g.waiting.Add(1)
		wg.Add(1)
		go func() { defer wg.Done(); c, _ := post(t, e, other, api.PathClaim, []byte(small), true); codes <- c }()
		g.waiting.Wait() // another token is not held up by pi1's
		close(g.gate)
		wg.Wait()
		close(codes)
		for c := range codes {
			if c != http.StatusOK {
				t.Errorf("a request in flight answered %d", c)
			}
		}
	})
	t.Run("bytes of events a second and the unread stream", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			limit func(*workapi.Limits)
			pause time.Duration // between requests: a stream's size is read again after 1 s
		}{
			{"event_rate", func(l *workapi.Limits) { l.EventRate = 1000 }, 0},
			{"max_stream", func(l *workapi.Limits) { l.MaxStream = 1 }, 1100 * time.Millisecond},
		} {
			t.Run(tc.name, func(t *testing.T) {
				lim := defaultLimits()
				lim.MaxBody = 64 << 10
				tc.limit(&lim)
				e := newAPIEnv(t, lim)
				tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
				rec, _ := json.Marshal(&events.Exception{Kind: events.KindRender, Message: strings.Repeat("m", 30<<10)})
				body, _ := json.Marshal(api.EventsRequest{Events: []api.Event{{Type: events.TypeException, Data: rec}}})
				var codes []int
				for range 4 {
					code, retry := post(t, e, tok, api.PathEvents, body, true)
					codes = append(codes, code)
					if code == http.StatusTooManyRequests && retry == "" {
						t.Error("429 without Retry-After")
					}
					time.Sleep(tc.pause)
				}
				if codes[0] != http.StatusOK || codes[len(codes)-1] != http.StatusTooManyRequests {
					t.Errorf("statuses %v: want 200 first, then 429", codes)
				}
			})
		}
	})
	t.Run("records counted as the body is decoded", func(t *testing.T) {
		lim := defaultLimits()
		lim.MaxBody, lim.MaxLinks = 1<<20, 100
		e := newAPIEnv(t, lim)
		tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
		var b strings.Builder
		b.WriteString(`{"completions":[{"lease":{"url":"http://a.test/","token":1},"outcome":"done","links":[`)
		for b.Len() < 1<<20-100 {
			b.WriteString(`{},`)
		}
		b.WriteString(`{}]}]}`)
		if code, _ := post(t, e, tok, api.PathComplete, []byte(b.String()), true); code != http.StatusRequestEntityTooLarge {
			t.Errorf("a completion of 350,000 links: %d, want 413", code)
		}
	})
}

// TestAPIUploadPace: a body must arrive by Options.UploadGrace plus a
// second per 64 KiB, so a token that uploads slowly holds its room in the
// decode budget no longer; the deadline is lifted once the body is in,
// so a request the master works on for longer is answered. Over HTTP/2
// and HTTP/1.1 (a slave's).
func TestAPIUploadPace(t *testing.T) {
	grace := func(o *workapi.Options) { o.UploadGrace = 200 * time.Millisecond }
	for _, proto := range []string{"HTTP/2", "HTTP/1.1"} {
		client := func(e *apiEnv) *http.Client {
			c := e.srv.Client()
			if proto == "HTTP/1.1" {
				tr := c.Transport.(*http.Transport).Clone()
				tr.ForceAttemptHTTP2 = false
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
				c = &http.Client{Transport: tr}
			}
			return c
		}
		t.Run(proto+"/a slow upload", func(t *testing.T) {
			e := newAPIEnv(t, defaultLimits(), grace)
			tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write([]byte(`{"max":1,"pad":"`)) }() // then nothing
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() { <-ctx.Done(); pw.CloseWithError(ctx.Err()) }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+api.PathClaim, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 1000
			req.Header.Set("Authorization", "Bearer "+tok)
			start := time.Now()
			resp, err := client(e).Do(req)
			took := time.Since(start)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Fatalf("a body that never arrived answered %d", resp.StatusCode)
				}
			}
			if took > 3*time.Second {
				t.Errorf("a body of 1000 bytes 16 of which came: cut off after %v, want about 0.2 s (%v)", took, err)
			}
		})
		t.Run(proto+"/the master's work after the body", func(t *testing.T) {
			g := &gatedFront{gate: make(chan struct{})}
			e := newAPIEnv(t, defaultLimits(), grace, func(o *workapi.Options) { g.Frontier = o.Front; o.Front = g })
			tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
			g.waiting.Add(1)
			go func() {
				g.waiting.Wait()
				time.Sleep(time.Second) // five graces after the body came
				close(g.gate)
			}()
			req, err := http.NewRequest(http.MethodPost, e.srv.URL+api.PathClaim, strings.NewReader(`{"max":1}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client(e).Do(req)
			if err != nil {
				t.Fatalf("a claim the master took 1 s over: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Proto != proto+map[bool]string{true: ".0"}[proto == "HTTP/2"] {
				t.Errorf("a claim the master took 1 s over: %d over %s, want 200 over %s", resp.StatusCode, resp.Proto, proto)
			}
		})
	}
}
