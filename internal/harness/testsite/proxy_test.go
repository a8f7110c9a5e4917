package testsite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// startProxies starts n proxies and closes them when the test ends.
func startProxies(t testing.TB, n int) []*Proxy {
	t.Helper()
	ps, err := StartProxies(n)
	if err != nil {
		t.Fatalf("StartProxies(%d): %v", n, err)
	}
	for _, p := range ps {
		t.Cleanup(p.Close)
	}
	return ps
}

// proxyClient returns a client that goes through proxy URL pu, follows no
// redirects and keeps no connection between requests.
func proxyClient(t testing.TB, pu string) *http.Client {
	t.Helper()
	u, err := url.Parse(pu)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ignoreAt ignores Hit.At, Hit.Host and Hit.Header.
var ignoreAt = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.Last().String()
	return s == ".At" || s == ".Host" || s == ".Header"
}, cmp.Ignore())

func TestProxyForwards(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 2, PagesPerHost: 5, Gzip: true})
	ps := startProxies(t, 2)
	if ps[0].Name() == ps[1].Name() || ps[0].URL() == ps[1].URL() || !strings.HasPrefix(ps[0].URL(), "http://127.0.0.1:") {
		t.Fatalf("proxies %s %s, %s %s", ps[0].Name(), ps[0].URL(), ps[1].Name(), ps[1].URL())
	}
	direct := newClient(t)
	page := s.PageURL(1, 3)
	want := fetch(t, direct, page)
	for _, p := range ps {
		c := proxyClient(t, p.URL())
		if r := fetch(t, c, page); r.status != 200 || !bytes.Equal(r.body, want.body) {
			t.Errorf("%s: %d, same body %v", p.Name(), r.status, bytes.Equal(r.body, want.body))
		}
		// Redirects come back, not followed.
		if r := fetch(t, c, h.LoopA); r.status != 302 || r.header.Get("Location") != "/hostile/loop/b" {
			t.Errorf("%s: loop: %d %q", p.Name(), r.status, r.header.Get("Location"))
		}
		// Encodings and bodies pass through untouched.
		r := fetch(t, c, page, "Accept-Encoding", "gzip")
		if r.header.Get("Content-Encoding") != "gzip" || bytes.Equal(r.body, want.body) {
			t.Errorf("%s: gzip: %q", p.Name(), r.header.Get("Content-Encoding"))
		}
		if r := fetch(t, c, h.Dups[0]+"x"); r.status != 404 {
			t.Errorf("%s: 404 page: %d", p.Name(), r.status)
		}
		if n := p.Requests(); n != 4 {
			t.Errorf("%s: %d requests, want 4", p.Name(), n)
		}
	}
	wantHits := []Hit{
		{Path: "/page/3", UserAgent: "Go-http-client/1.1", Status: 200},
	}
	for _, p := range ps {
		wantHits = append(wantHits,
			Hit{Path: "/page/3", UserAgent: "Go-http-client/1.1", Status: 200, Via: p.Name()},
			Hit{Path: "/hostile/loop/a", UserAgent: "Go-http-client/1.1", Status: 302, Via: p.Name()},
			Hit{Path: "/page/3", UserAgent: "Go-http-client/1.1", Status: 200, Via: p.Name()},
			Hit{Path: "/hostile/dup/1x", UserAgent: "Go-http-client/1.1", Status: 404, Via: p.Name()},
		)
	}
	if diff := cmp.Diff(wantHits, s.Hits(), ignoreAt); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
}

func TestProxyStreams(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	p := startProxies(t, 1)[0]
	c := proxyClient(t, p.URL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.Slow, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != "<!" {
		t.Errorf("slow through the proxy: %q %v", got, err)
	}
	cancel()
	resp.Body.Close()

	resp, err = c.Get(h.Bomb)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil || n != resp.ContentLength || n > 2<<20 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("bomb through the proxy: %d bytes of %d, %v, %v", n, resp.ContentLength, err, resp.Header)
	}
	if hits := s.Hits(); len(hits) != 2 || hits[0].Via != p.Name() || hits[1].Via != p.Name() {
		t.Errorf("hits %+v", hits)
	}
}

func TestProxyConnect(t *testing.T) {
	s := start(t, Options{Hosts: 1, PagesPerHost: 5})
	p := startProxies(t, 1)[0]
	target := strings.TrimSuffix(strings.TrimPrefix(s.Seeds()[0], "http://"), "/")
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.URL(), "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(conn, "GET /page/2 HTTP/1.1\r\nHost: %s\r\nUser-Agent: tunnel\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(body, []byte("<title>Host 0 page 2</title>")) {
		t.Errorf("through the tunnel: %d %v %.80q", resp.StatusCode, err, body)
	}
	// The tunnel is opaque: the site sees a direct request.
	want := []Hit{{Path: "/page/2", UserAgent: "tunnel", Status: 200}}
	if diff := cmp.Diff(want, s.Hits(), ignoreAt); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
	if n := p.Requests(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestProxyStatusDownAuth(t *testing.T) {
	s := start(t, Options{Hosts: 1, PagesPerHost: 5})
	p := startProxies(t, 1)[0]
	page := s.PageURL(0, 1)
	c := proxyClient(t, p.URL())

	p.SetStatus(http.StatusForbidden)
	if r := fetch(t, c, page); r.status != 403 {
		t.Errorf("banned: %d, want 403", r.status)
	}
	if len(s.Hits()) != 0 {
		t.Errorf("a banned request reached the site: %+v", s.Hits())
	}
	p.SetStatus(0)
	if r := fetch(t, c, page); r.status != 200 {
		t.Errorf("unbanned: %d, want 200", r.status)
	}

	if err := p.SetDown(true); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(page); err == nil {
		resp.Body.Close()
		t.Errorf("down: %d, want an error", resp.StatusCode)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("down: %v, want connection refused", err)
	}
	if err := p.SetDown(false); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, c, page); r.status != 200 {
		t.Errorf("up again: %d, want 200", r.status)
	}

	p.RequireAuth("crawler", "s3cret")
	if r := fetch(t, c, page); r.status != 407 || !strings.HasPrefix(r.header.Get("Proxy-Authenticate"), "Basic") {
		t.Errorf("no credentials: %d %q, want 407", r.status, r.header.Get("Proxy-Authenticate"))
	}
	bad := strings.Replace(p.URL(), "http://", "http://crawler:wrong@", 1)
	if r := fetch(t, proxyClient(t, bad), page); r.status != 407 {
		t.Errorf("wrong password: %d, want 407", r.status)
	}
	good := strings.Replace(p.URL(), "http://", "http://crawler:s3cret@", 1)
	if r := fetch(t, proxyClient(t, good), page); r.status != 200 {
		t.Errorf("credentials: %d, want 200", r.status)
	}
	if n := p.Requests(); n != 6 {
		t.Errorf("%d requests, want 6", n)
	}
	if hits := s.Hits(); len(hits) != 3 || hits[2].Via != p.Name() {
		t.Errorf("hits %+v", hits)
	}
	if r := fetch(t, c, "http://192.0.2.1/"); r.status != 407 {
		t.Errorf("non-loopback target before auth: %d", r.status)
	}
}

func TestProxyRefusesOthers(t *testing.T) {
	p := startProxies(t, 1)[0]
	c := proxyClient(t, p.URL())
	// Refused before any packet leaves loopback.
	for _, u := range []string{"http://192.0.2.1/", "http://example.invalid/"} {
		if r := fetch(t, c, u); r.status != http.StatusBadGateway {
			t.Errorf("%s: %d, want 502", u, r.status)
		}
	}
	resp, err := newClient(t).Get(p.URL() + "/page/1") // origin-form: not a proxy request
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form request: %d, want 400", resp.StatusCode)
	}
}

func TestStartProxiesInvalid(t *testing.T) {
	for _, n := range []int{0, -1, 65} {
		if ps, err := StartProxies(n); err == nil {
			for _, p := range ps {
				p.Close()
			}
			t.Errorf("StartProxies(%d) succeeded", n)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SetStatus(42) did not panic")
		}
	}()
	startProxies(t, 1)[0].SetStatus(42)
}

// TestProxyCloseNoLeaks closes a proxy while it streams the slow page and
// holds a tunnel, then the site.
func TestProxyCloseNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := Start(Options{Hosts: 1, PagesPerHost: 5, Hostile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ps, err := StartProxies(1)
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	u, _ := url.Parse(p.URL())
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	defer tr.CloseIdleConnections()
	slowErr, tunnelDone := make(chan error, 1), make(chan struct{})
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(s.Hostile().Slow)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		slowErr <- err
	}()
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := u.Host // the proxy itself: any loopback address will do
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	go func() {
		defer close(tunnelDone)
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		_, _ = io.Copy(io.Discard, conn) // until the proxy closes it
	}()
	for deadline := time.Now().Add(5 * time.Second); p.Requests() < 2 || len(s.Hits()) < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("requests never arrived")
		}
	}
	p.Close()
	p.Close() // idempotent
	if err := <-slowErr; err == nil {
		t.Error("the slow page ended cleanly when the proxy closed")
	}
	<-tunnelDone
	s.Close()
	if err := p.SetDown(false); err != nil {
		t.Errorf("SetDown after Close: %v", err)
	}
}
