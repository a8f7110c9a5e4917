package slaved

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/slave/dnscache"
	"github.com/redcrawl/redcrawl/slave/netguard"
)

// dnsServer answers A queries for names under .test with 127.0.0.1 and a
// 300 s TTL on loopback, counting the queries.
func dnsServer(t *testing.T) (addr string, queries *atomic.Int64) {
	t.Helper()
	queries = new(atomic.Int64)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if strings.HasSuffix(q.Name, ".test.") && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA,
				Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(127, 0, 0, 1)})
		} else if !strings.HasSuffix(q.Name, ".test.") {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String(), queries
}

func newTestFetcher(t *testing.T, cfg *config.Config) *httpFetcher {
	t.Helper()
	s, err := New(cfg, Options{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dnscache.New(dnscache.Options{Server: cfg.DNS.Server})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ctx, cancel := context.WithCancel(context.Background())
	f, err := s.newHTTPFetcher(ctx, r)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); f.close() })
	return f
}

// TestFetchThroughDNSCache fetches a host name several times through the
// configured DNS server: one query per TTL, and the private-network guard
// still refuses the resolved loopback address when private networks are
// not allowed.
func TestFetchThroughDNSCache(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<a href="/next">n</a>`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	addr, queries := dnsServer(t)

	cfg := config.Default()
	cfg.DNS.Server = addr
	cfg.Fetch.AllowPrivateNetworks = true
	f := newTestFetcher(t, &cfg)
	for range 5 {
		res, err := f.Fetch(context.Background(), FetchRequest{URL: "http://site.test:" + port + "/"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 200 || res.Body.Size() == 0 || res.Proxy != "direct" {
			t.Errorf("response %d, %d bytes, via %s", res.Status, res.Body.Size(), res.Proxy)
		}
		res.Close()
	}
	// A and AAAA once each for the name, whatever the number of fetches
	if n := queries.Load(); n != 2 {
		t.Errorf("%d DNS queries for 5 fetches, want 2 (A and AAAA once)", n)
	}

	cfg.Fetch.AllowPrivateNetworks = false
	f = newTestFetcher(t, &cfg)
	_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://site.test:" + port + "/"})
	var fe *FetchError
	var be *netguard.BlockedError
	if !errors.As(err, &fe) || fe.Kind != events.KindBlocked || !errors.As(err, &be) {
		t.Errorf("fetch of a name resolving to loopback: %v, want a blocked error", err)
	}
	_, err = f.Fetch(context.Background(), FetchRequest{URL: "http://nowhere.invalid:" + port + "/"})
	if !errors.As(err, &fe) || fe.Kind != events.KindDNS {
		t.Errorf("fetch of an unknown name: %v, want a dns error", err)
	}
}

// TestFetchBodyBounds checks the decompressed cap on an unasked gzip body
// and the deadline on a slow body.
func TestFetchBodyBounds(t *testing.T) {
	slow := make(chan struct{})
	defer close(slow)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			w.Write([]byte("<html>"))
			w.(http.Flusher).Flush()
			select {
			case <-slow:
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		default:
			w.Write([]byte(strings.Repeat("x", 5000)))
		}
	}))
	defer srv.Close()
	cfg := config.Default()
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.MaxBodyBytes = 1000
	cfg.Fetch.Timeout = 300 * time.Millisecond
	f := newTestFetcher(t, &cfg)
	res, err := f.Fetch(context.Background(), FetchRequest{URL: srv.URL + "/big"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated() || res.Body.Size() != 1000 {
		t.Errorf("big body: truncated %v, %d bytes kept", res.Truncated(), res.Body.Size())
	}
	res.Close()
	_, err = f.Fetch(context.Background(), FetchRequest{URL: srv.URL + "/slow"})
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Kind != events.KindTimeout || !fe.Retryable {
		t.Errorf("slow body: %v, want a retryable timeout", err)
	}
}

// TestFetchRequestTimeout fetches a page whose headers come after 300ms
// with fetch.timeout and a rule set's timeout: the request's own timeout
// wins both ways, the headers' wait included.
func TestFetchRequestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(300 * time.Millisecond):
			w.Write([]byte("<html>late</html>"))
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	tests := []struct {
		name           string
		crawl, rule    time.Duration
		wantTimeout    bool
		wantFasterThan time.Duration
	}{
		{"crawl's timeout cuts it", 100 * time.Millisecond, 0, true, 250 * time.Millisecond},
		{"crawl's timeout lets it", 2 * time.Second, 0, false, 0},
		{"rule's shorter timeout cuts it", 2 * time.Second, 100 * time.Millisecond, true, 250 * time.Millisecond},
		{"rule's longer timeout lets it", 100 * time.Millisecond, 2 * time.Second, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Fetch.AllowPrivateNetworks = true
			cfg.Fetch.Timeout = tc.crawl
			f := newTestFetcher(t, &cfg)
			start := time.Now()
			res, err := f.Fetch(context.Background(), FetchRequest{URL: srv.URL + "/", Timeout: tc.rule})
			took := time.Since(start)
			if tc.wantTimeout {
				var fe *FetchError
				if !errors.As(err, &fe) || fe.Kind != events.KindTimeout {
					t.Fatalf("got %v, want a timeout", err)
				}
				if took > tc.wantFasterThan {
					t.Errorf("timed out after %v, want before %v", took, tc.wantFasterThan)
				}
				return
			}
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			res.Close()
			if res.Status != 200 {
				t.Errorf("status %d", res.Status)
			}
		})
	}
}
