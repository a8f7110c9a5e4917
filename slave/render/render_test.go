package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// chromePath returns the browser to test with (REDCRAWL_CHROME overrides
// /usr/bin/chromium) or skips the test.
func chromePath(tb testing.TB) string {
	tb.Helper()
	path := os.Getenv("REDCRAWL_CHROME")
	if path == "" {
		path = DefaultChromePath
	}
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("no browser at %s (set REDCRAWL_CHROME to another chromium): %v", path, err)
	}
	return path
}

// newRenderer starts a Renderer for the test and closes it at the end.
func newRenderer(tb testing.TB, opt Options) *Renderer {
	tb.Helper()
	opt.ChromePath = chromePath(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := New(ctx, opt)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return r
}

// serve starts an httptest server on 127.0.0.1 closed at the end of the
// test. Handlers that block must end when their request's context does.
func serve(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// html serves a fixed page.
func html(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}
}

func renderCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const jsPage = `<!doctype html><html><head><title>js</title></head><body><div id="list"></div>
<script>
window.addEventListener("load", () => {
  const list = document.getElementById("list");
  for (const h of ["/a", "/b"]) {
    const a = document.createElement("a");
    a.href = h;
    a.textContent = "link " + h;
    list.appendChild(a);
  }
  const p = document.createElement("span");
  p.className = "price";
  p.textContent = "€42.50";
  list.appendChild(p);
});
</script></body></html>`

const waitPage = `<!doctype html><html><body><p>early</p>
<script>setTimeout(() => {
  const d = document.createElement("div");
  d.id = "late";
  d.textContent = "arrived late";
  document.body.appendChild(d);
}, 300);</script></body></html>`

const scrollPage = `<!doctype html><html><head><style>.item{height:100px}</style></head><body><div id="items"></div>
<script>
let n = 0;
const items = document.getElementById("items");
const add = (k) => { for (let i = 0; i < k; i++) { const d = document.createElement("div"); d.className = "item"; d.textContent = "item " + (++n); items.appendChild(d); } };
add(20);
window.addEventListener("scroll", () => {
  if (window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 5 && n < 500) add(10);
});
</script></body></html>`

const clickPage = `<!doctype html><html><body><div id="items"></div><button id="more">Load more</button>
<script>
let clicks = 0, n = 0;
const items = document.getElementById("items"), more = document.getElementById("more");
more.addEventListener("click", () => {
  setTimeout(() => {
    clicks++;
    for (let i = 0; i < 5; i++) { const d = document.createElement("div"); d.className = "item"; d.textContent = "item " + (++n); items.appendChild(d); }
    if (clicks >= 3) more.remove();
  }, 100);
});
</script></body></html>`

// TestRenderPages renders pages whose content depends on JavaScript, the
// waits, the interactions, the main document's status and headers, and
// the user agent.
func TestRenderPages(t *testing.T) {
	var (
		mu      sync.Mutex
		lastUA  string
		uaCount int
	)
	mux := http.NewServeMux()
	mux.Handle("/js", html(jsPage))
	mux.Handle("/wait", html(waitPage))
	mux.Handle("/scroll", html(scrollPage))
	mux.Handle("/click", html(clickPage))
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html><body><h1>not here</h1></body></html>")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusFound)
	})
	mux.Handle("/final", html("<html><body>final page</body></html>"))
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastUA = r.UserAgent()
		uaCount++
		mu.Unlock()
		html("<html><body>ua</body></html>")(w, r)
	})
	srv := serve(t, mux)
	r := newRenderer(t, Options{AllowPrivateNetworks: true, Tabs: 2})

	count := func(html []byte, s string) int { return bytes.Count(html, []byte(s)) }
	tests := []struct {
		name  string
		req   Request
		check func(t *testing.T, res *Result)
	}{
		{"javascript", Request{URL: srv.URL + "/js"}, func(t *testing.T, res *Result) {
			for _, want := range []string{`<a href="/a">link /a</a>`, `<a href="/b">link /b</a>`, `<span class="price">€42.50</span>`} {
				if !strings.Contains(string(res.HTML), want) {
					t.Errorf("rendered HTML lacks %q:\n%s", want, res.HTML)
				}
			}
		}},
		{"wait selector", Request{URL: srv.URL + "/wait", WaitSelector: "#late"}, func(t *testing.T, res *Result) {
			if !strings.Contains(string(res.HTML), `<div id="late">arrived late</div>`) {
				t.Errorf("rendered HTML lacks the late element:\n%s", res.HTML)
			}
		}},
		{"scroll", Request{URL: srv.URL + "/scroll", Scroll: 3}, func(t *testing.T, res *Result) {
			if got := count(res.HTML, `class="item"`); got != 50 {
				t.Errorf("items after 3 scrolls = %d, want 50 (20 + 3×10)", got)
			}
		}},
		{"no scroll", Request{URL: srv.URL + "/scroll"}, func(t *testing.T, res *Result) {
			if got := count(res.HTML, `class="item"`); got != 20 {
				t.Errorf("items without scrolling = %d, want 20", got)
			}
		}},
		{"click load more", Request{URL: srv.URL + "/click", ClickSelector: "#more", ClickTimes: 10}, func(t *testing.T, res *Result) {
			if got := count(res.HTML, `class="item"`); got != 15 {
				t.Errorf("items after clicking = %d, want 15 (3 clicks × 5)", got)
			}
			if strings.Contains(string(res.HTML), `id="more"`) {
				t.Errorf("the button is still there after 3 clicks")
			}
		}},
		{"click twice", Request{URL: srv.URL + "/click", ClickSelector: "#more", ClickTimes: 2}, func(t *testing.T, res *Result) {
			if got := count(res.HTML, `class="item"`); got != 10 {
				t.Errorf("items after 2 clicks = %d, want 10", got)
			}
		}},
		{"status and headers", Request{URL: srv.URL + "/missing"}, func(t *testing.T, res *Result) {
			if res.Status != http.StatusNotFound {
				t.Errorf("Status = %d, want 404", res.Status)
			}
			if got := res.Header.Get("X-Test"); got != "yes" {
				t.Errorf("X-Test header = %q, want yes (header %v)", got, res.Header)
			}
			if !strings.Contains(string(res.HTML), "not here") {
				t.Errorf("HTML lacks the 404 page:\n%s", res.HTML)
			}
		}},
		{"redirect", Request{URL: srv.URL + "/redirect"}, func(t *testing.T, res *Result) {
			if res.Status != http.StatusOK || res.FinalURL != srv.URL+"/final" {
				t.Errorf("Status, FinalURL = %d, %s; want 200, %s/final", res.Status, res.FinalURL, srv.URL)
			}
		}},
		{"network idle", Request{URL: srv.URL + "/js", WaitNetworkIdle: true}, func(t *testing.T, res *Result) {
			if !strings.Contains(string(res.HTML), `class="price"`) {
				t.Errorf("HTML lacks the price:\n%s", res.HTML)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Render(renderCtx(t), tt.req)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			tt.check(t, res)
		})
	}

	t.Run("plain GET lacks the script's content", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/js")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range []string{`<a href="/a">`, `class="price">`} {
			if strings.Contains(string(body), s) {
				t.Errorf("the static page already contains %q", s)
			}
		}
	})

	t.Run("user agent", func(t *testing.T) {
		for _, tt := range []struct {
			name, ua string
			want     func(string) bool
		}{
			{"set", "redcrawl-test/1.0", func(s string) bool { return s == "redcrawl-test/1.0" }},
			{"default", "", func(s string) bool { return strings.Contains(s, "Chrome/") && !strings.Contains(s, "Headless") }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := r.Render(renderCtx(t), Request{URL: srv.URL + "/ua", UserAgent: tt.ua}); err != nil {
					t.Fatalf("Render: %v", err)
				}
				mu.Lock()
				got := lastUA
				mu.Unlock()
				if !tt.want(got) {
					t.Errorf("server saw User-Agent %q", got)
				}
			})
		}
	})
}

// TestRenderBlock checks that a blocked resource type never reaches the
// server.
func TestRenderBlock(t *testing.T) {
	r := newRenderer(t, Options{AllowPrivateNetworks: true})
	for _, tt := range []struct {
		name  string
		block []string
		want  int64
	}{
		{"not blocked", nil, 1},
		{"image blocked", []string{"image"}, 0},
		{"stylesheet blocked only", []string{"stylesheet", "font"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int64
			mux := http.NewServeMux()
			mux.Handle("/", html(`<html><body><img src="/img.png"><p>page</p></body></html>`))
			mux.HandleFunc("/img.png", func(w http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "image/png")
				w.Write(tinyPNG)
			})
			srv := serve(t, mux)
			res, err := r.Render(renderCtx(t), Request{URL: srv.URL + "/", Block: tt.block})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !strings.Contains(string(res.HTML), "<p>page</p>") {
				t.Errorf("HTML = %s", res.HTML)
			}
			if got := hits.Load(); got != tt.want {
				t.Errorf("image requests = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestRenderHeader renders a page with extra headers: the page and its
// image on the same host carry them (over the browser's own
// Accept-Language), an image of another host does not.
func TestRenderHeader(t *testing.T) {
	r := newRenderer(t, Options{AllowPrivateNetworks: true})
	var mu sync.Mutex
	got := map[string][2]string{} // path -> X-Site-Key, Accept-Language
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			got[req.URL.Path] = [2]string{req.Header.Get("X-Site-Key"), req.Header.Get("Accept-Language")}
			mu.Unlock()
			next.ServeHTTP(w, req)
		})
	}
	png := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(tinyPNG)
	}
	other := http.NewServeMux()
	other.HandleFunc("/other.png", png)
	otherSrv := serve(t, record(other))
	mux := http.NewServeMux()
	mux.Handle("/", html(`<html><body><img src="/own.png"><img src="`+otherSrv.URL+`/other.png"><p>page</p></body></html>`))
	mux.HandleFunc("/own.png", png)
	srv := serve(t, record(mux))
	res, err := r.Render(renderCtx(t), Request{URL: srv.URL + "/", WaitNetworkIdle: true,
		Header: http.Header{"X-Site-Key": {"k1"}, "Accept-Language": {"fr-FR"}}})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if !strings.Contains(string(res.HTML), "<p>page</p>") {
		t.Errorf("HTML = %s", res.HTML)
	}
	mu.Lock()
	defer mu.Unlock()
	delete(got, "/favicon.ico") // asked for or not, by the browser's whim
	want := map[string][2]string{"/": {"k1", "fr-FR"}, "/own.png": {"k1", "fr-FR"}, "/other.png": {"", got["/other.png"][1]}}
	if got["/other.png"][1] == "fr-FR" {
		t.Error("another host's request carries the page's Accept-Language")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("headers by path (-want +got):\n%s", d)
	}
}

// tinyPNG is a 1×1 transparent PNG.
var tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")

// proxy is a tiny HTTP forward proxy (no CONNECT) that counts the
// requests it forwards, optionally requiring Basic credentials, and that
// can serve made-up hosts itself.
type proxy struct {
	user, pass string
	fake       map[string]http.Handler // host -> handler answering for it
	tr         *http.Transport

	mu   sync.Mutex
	seen []string // URLs forwarded or served
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect || !r.URL.IsAbs() {
		http.Error(w, "forward proxy only", http.StatusMethodNotAllowed)
		return
	}
	if p.user != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.pass))
		if r.Header.Get("Proxy-Authorization") != want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			http.Error(w, "proxy auth required", http.StatusProxyAuthRequired)
			return
		}
	}
	p.mu.Lock()
	p.seen = append(p.seen, r.URL.String())
	p.mu.Unlock()
	if h, ok := p.fake[r.URL.Hostname()]; ok {
		h.ServeHTTP(w, r)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *proxy) urls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func newProxy(t *testing.T, user, pass string, fake map[string]http.Handler) (*proxy, *httptest.Server) {
	p := &proxy{user: user, pass: pass, fake: fake, tr: &http.Transport{}}
	t.Cleanup(p.tr.CloseIdleConnections)
	return p, serve(t, p)
}

// TestRenderProxy renders through a forward proxy, with and without
// credentials.
func TestRenderProxy(t *testing.T) {
	var direct atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page" {
			direct.Add(1)
		}
		html(`<html><body><p id="target">target page</p></body></html>`)(w, r)
	}))
	r := newRenderer(t, Options{AllowPrivateNetworks: true})
	for _, tt := range []struct {
		name, user, pass string
	}{
		{"open proxy", "", ""},
		{"proxy with credentials", "crawler", "s3cret:x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, psrv := newProxy(t, tt.user, tt.pass, nil)
			proxyURL := psrv.URL
			if tt.user != "" {
				proxyURL = "http://" + tt.user + ":" + strings.ReplaceAll(tt.pass, ":", "%3A") + "@" + strings.TrimPrefix(psrv.URL, "http://")
			}
			before := direct.Load()
			res, err := r.Render(renderCtx(t), Request{URL: srv.URL + "/page", Proxy: proxyURL})
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !strings.Contains(string(res.HTML), "target page") {
				t.Errorf("HTML = %s", res.HTML)
			}
			var viaProxy int
			for _, u := range p.urls() {
				if u == srv.URL+"/page" {
					viaProxy++
				}
			}
			if viaProxy != 1 || direct.Load()-before != 1 {
				t.Errorf("page requests via the proxy = %d, at the server = %d; want 1 and 1 (proxy saw %q)",
					viaProxy, direct.Load()-before, p.urls())
			}
		})
	}
}

// TestRenderGuard checks the private-network guard: a private main
// document fails with kind blocked and reaches nobody; a private
// subresource of a public page is refused while the page renders.
func TestRenderGuard(t *testing.T) {
	var hits atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		html("<html><body>private</body></html>")(w, r)
	}))
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "private.test":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "loopback.test":
			return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("127.0.0.1")}, nil
		case "public.test":
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		}
		return nil, fmt.Errorf("lookup %s: no such host in the test", host)
	}
	r := newRenderer(t, Options{Lookup: lookup})
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()

	var imgs atomic.Int64
	p, psrv := newProxy(t, "", "", map[string]http.Handler{
		"public.test": html(`<html><body><p>public page</p><img src="http://private.test/x.png"><img src="http://loopback.test/y.png"></body></html>`),
		"private.test": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			imgs.Add(1)
			w.Write(tinyPNG)
		}),
		"loopback.test": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			imgs.Add(1)
			w.Write(tinyPNG)
		}),
	})

	for _, tt := range []struct {
		name, url string
	}{
		{"ip literal", srv.URL + "/"},
		{"localhost spelled as decimal", "http://2130706433:" + strconv.Itoa(int(port)) + "/"},
		{"name resolving to loopback", "http://loopback.test:" + strconv.Itoa(int(port)) + "/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Render(renderCtx(t), Request{URL: tt.url})
			var re *Error
			if !errors.As(err, &re) || re.Kind != KindBlocked {
				t.Fatalf("Render error = %v, want kind %s", err, KindBlocked)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the private server saw %d requests", n)
			}
		})
	}
	t.Run("private subresource of a public page", func(t *testing.T) {
		res, err := r.Render(renderCtx(t), Request{URL: "http://public.test/", Proxy: psrv.URL})
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		if !strings.Contains(string(res.HTML), "public page") {
			t.Errorf("HTML = %s", res.HTML)
		}
		if n := imgs.Load(); n != 0 {
			t.Errorf("private images fetched %d times (proxy saw %q)", n, p.urls())
		}
	})
}

// TestRenderTimeout renders a page that never finishes loading.
func TestRenderTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<html><body><p id="partial">partial content</p>`+strings.Repeat("<!-- padding -->", 100)+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer close(release)
	dir := t.TempDir()
	for _, tt := range []struct {
		name     string
		dir      string
		snapshot bool
		caller   bool // the caller's deadline ends the render, not Timeout
	}{
		{"with snapshot", dir, true, false},
		{"without snapshot dir", "", false, false},
		{"caller deadline", dir, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRenderer(t, Options{AllowPrivateNetworks: true, SnapshotDir: tt.dir})
			re := renderTimeout(t, r, srv.URL+"/", tt.caller, func(re *Error) bool {
				b, err := os.ReadFile(re.Snapshot)
				return !tt.snapshot || err == nil && strings.Contains(string(b), `<p id="partial">partial content</p>`)
			})
			if !tt.snapshot {
				if re.Snapshot != "" {
					t.Errorf("Snapshot = %q without a SnapshotDir", re.Snapshot)
				}
				return
			}
			if filepath.Dir(re.Snapshot) != dir {
				t.Fatalf("Snapshot = %q, want a file in %s", re.Snapshot, dir)
			}
			b, err := os.ReadFile(re.Snapshot)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `<p id="partial">partial content</p>`) {
				t.Errorf("snapshot lacks the partial content:\n%s", b)
			}
		})
	}
}

// renderTimeout renders url, a page that never finishes loading, until
// its timeout (or, with caller, the caller's deadline) ends it, and returns
// the timeout error. The render must get far enough to show the partial
// page before the deadline, which a loaded machine may not reach in the
// first second: while done says the result is not yet what the test wants,
// it tries again with twice the time, up to 8 s. A real fault fails every
// try and the caller's checks report the last.
func renderTimeout(t *testing.T, r *Renderer, url string, caller bool, done func(*Error) bool) *Error {
	t.Helper()
	var re *Error
	for d := time.Second; d <= 8*time.Second; d *= 2 {
		ctx, req := renderCtx(t), Request{URL: url, Timeout: d}
		if caller {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
			req.Timeout = time.Minute
		}
		_, err := r.Render(ctx, req)
		if !errors.As(err, &re) || re.Kind != KindTimeout {
			t.Fatalf("Render error = %v, want kind %s", err, KindTimeout)
		}
		if done(re) {
			return re
		}
		t.Logf("after %v: snapshot %q is not yet the partial page; trying with more time", d, re.Snapshot)
	}
	return re
}

// TestRenderCrash kills the browser in the middle of a render: that render
// fails with render_crash and the next one runs in a new browser.
func TestRenderCrash(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.Handle("/ok", html("<html><body>fine</body></html>"))
	srv := serve(t, mux)
	defer close(release)
	r := newRenderer(t, Options{AllowPrivateNetworks: true})
	pid := r.browserPID()
	if pid == 0 {
		t.Fatal("no browser pid")
	}

	errc := make(chan error, 1)
	go func() {
		_, err := r.Render(context.Background(), Request{URL: srv.URL + "/hang", Timeout: 30 * time.Second})
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the page was never requested")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	var re *Error
	if !errors.As(err, &re) || re.Kind != KindCrash {
		t.Fatalf("Render error = %v, want kind %s", err, KindCrash)
	}

	res, err := r.Render(renderCtx(t), Request{URL: srv.URL + "/ok"})
	if err != nil {
		t.Fatalf("Render after the crash: %v", err)
	}
	if !strings.Contains(string(res.HTML), "fine") {
		t.Errorf("HTML = %s", res.HTML)
	}
	if got := r.browserPID(); got == pid || got == 0 {
		t.Errorf("browser pid after the crash = %d, was %d", got, pid)
	}
}

// TestRenderConcurrency runs 8 renders on 2 tabs: all succeed, never more
// than 2 at once at the server.
func TestRenderConcurrency(t *testing.T) {
	var cur, peak atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page" {
			http.NotFound(w, r)
			return
		}
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
		html("<html><body>page "+r.URL.Query().Get("i")+"</body></html>")(w, r)
	}))
	r := newRenderer(t, Options{AllowPrivateNetworks: true, Tabs: 2})
	ctx := renderCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			res, err := r.Render(ctx, Request{URL: fmt.Sprintf("%s/page?i=%d", srv.URL, i)})
			if err == nil && !strings.Contains(string(res.HTML), fmt.Sprintf("page %d", i)) {
				err = fmt.Errorf("HTML = %s", res.HTML)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("render %d: %v", i, err)
		}
	}
	if p := peak.Load(); p > 2 || p < 1 {
		t.Errorf("peak concurrent page requests = %d, want 1 or 2", p)
	}
}

// TestRenderClosed checks Render after Close.
func TestRenderClosed(t *testing.T) {
	r := newRenderer(t, Options{AllowPrivateNetworks: true})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Render(context.Background(), Request{URL: "http://127.0.0.1:1/"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Render after Close = %v, want ErrClosed", err)
	}
}

// TestRenderMaxHTML checks the cap on the returned DOM.
func TestRenderMaxHTML(t *testing.T) {
	srv := serve(t, html("<html><body>"+strings.Repeat("é", 5000)+"</body></html>"))
	r := newRenderer(t, Options{AllowPrivateNetworks: true, MaxHTMLBytes: 1001})
	res, err := r.Render(renderCtx(t), Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.HTML) > 1001 || len(res.HTML) < 997 || !strings.HasPrefix(string(res.HTML), "<html>") {
		t.Errorf("Truncated %v, %d bytes, want ≤ 1001 at a rune boundary: %q", res.Truncated, len(res.HTML), res.HTML[:40])
	}
}

// TestPrepare checks request validation without a browser.
func TestPrepare(t *testing.T) {
	for _, tt := range []struct {
		name    string
		req     Request
		wantErr string
		want    job
	}{
		{"defaults", Request{URL: "http://example.com/"}, "", job{proxy: ""}},
		{"proxy with credentials", Request{URL: "https://example.com/", Proxy: "http://u:p%40ss@proxy:3128"}, "",
			job{proxy: "http://proxy:3128", proxyUser: "u", proxyPass: "p@ss", hasAuth: true}},
		{"socks proxy", Request{URL: "http://example.com/", Proxy: "socks5://proxy:1080"}, "", job{proxy: "socks5://proxy:1080"}},
		{"bad scheme", Request{URL: "ftp://example.com/"}, "unsupported scheme", job{}},
		{"no host", Request{URL: "http:///x"}, "no host", job{}},
		{"bad block", Request{URL: "http://example.com/", Block: []string{"script"}}, "unknown resource type", job{}},
		{"socks credentials", Request{URL: "http://example.com/", Proxy: "socks5://u:p@proxy:1080"}, "socks", job{}},
		{"bad proxy scheme", Request{URL: "http://example.com/", Proxy: "ftp://proxy:21"}, "unsupported scheme", job{}},
		{"negative", Request{URL: "http://example.com/", Scroll: -1}, "negative", job{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j, err := prepare(tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("prepare error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.req.Timeout != DefaultTimeout {
				t.Errorf("Timeout = %v", j.req.Timeout)
			}
			got := job{proxy: j.proxy, proxyUser: j.proxyUser, proxyPass: j.proxyPass, hasAuth: j.hasAuth}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(job{})); diff != "" {
				t.Errorf("job (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkRender renders a small page repeatedly and reports ms per
// render and the browser's memory (PSS of its processes) at the end.
func BenchmarkRender(b *testing.B) {
	srv := serve(b, html(`<html><body><div id="x"></div><script>document.getElementById("x").textContent = "hello";</script></body></html>`))
	r := newRenderer(b, Options{AllowPrivateNetworks: true})
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := r.Render(ctx, Request{URL: srv.URL}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/render")
	if kb := treePSS(r.browserPID()); kb > 0 {
		b.ReportMetric(float64(kb)/1024, "browser-MiB")
	}
}

// treePSS returns the summed proportional set size, in KiB, of pid and its
// descendants (0 if it cannot be read).
func treePSS(pid int) int64 {
	children := map[int][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		pp, _ := strconv.Atoi(fields[1])
		children[pp] = append(children[pp], p)
	}
	var total int64
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb
			}
		}
		f.Close()
	}
	return total
}
