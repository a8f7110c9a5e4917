package broadsite

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

// TestDNS asks the site's DNS server, over UDP and TCP, for names of the
// site and others.
func TestDNS(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := Start(Options{Hosts: 40, Addrs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name  string
		qtype uint16
		rcode int
		a     string // the A record, "" for none
	}{
		{"h0.bench.test.", dns.TypeA, dns.RcodeSuccess, "127.0.1.1"},
		{"H5.Bench.Test.", dns.TypeA, dns.RcodeSuccess, "127.0.1.2"},
		{"h39.bench.test.", dns.TypeA, dns.RcodeSuccess, "127.0.1.4"},
		{"h39.bench.test.", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"h40.bench.test.", dns.TypeA, dns.RcodeNameError, ""},
		{"h01.bench.test.", dns.TypeA, dns.RcodeNameError, ""},
		{"bench.test.", dns.TypeA, dns.RcodeNameError, ""},
		{"h1.example.com.", dns.TypeA, dns.RcodeNameError, ""},
	}
	defer func() {
		if got, want := s.DNSQueries(), int64(2*len(tests)); got != want {
			t.Errorf("%d queries counted, want %d", got, want)
		}
	}()
	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: 10 * time.Second}
		for _, tt := range tests {
			m := new(dns.Msg)
			m.SetQuestion(tt.name, tt.qtype)
			r, _, err := c.Exchange(m, s.DNSAddr())
			if err != nil {
				t.Fatalf("%s %s: %v", proto, tt.name, err)
			}
			a := ""
			for _, rr := range r.Answer {
				if x, ok := rr.(*dns.A); ok {
					a = x.A.String()
				}
			}
			if r.Rcode != tt.rcode || a != tt.a {
				t.Errorf("%s %s type %d: rcode %d, A %q; want %d, %q", proto, tt.name, tt.qtype, r.Rcode, a, tt.rcode, tt.a)
			}
		}
	}
}

// TestPages fetches every page of a small site by its name, at the
// address the DNS answers, follows the links and checks the counts.
func TestPages(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := Start(Options{Hosts: 6, PagesPerHost: 3, PageBytes: 3000, Addrs: 3, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip, ok := s.resolve(host)
		if !ok {
			return nil, &net.DNSError{Name: host, Err: "no such host", IsNotFound: true}
		}
		return dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	href := regexp.MustCompile(`href="([^"]+)"`)
	var local []string
	for _, seed := range s.Seeds() {
		code, body := get(seed)
		if code != http.StatusOK || len(body) < 3000 {
			t.Fatalf("%s: %d, %d bytes", seed, code, len(body))
		}
		var links []string
		for _, m := range href.FindAllStringSubmatch(body, -1) {
			if strings.HasPrefix(m[1], "/") {
				links = append(links, m[1])
			} else if !strings.HasPrefix(m[1], "http://h") {
				t.Errorf("%s links to %s", seed, m[1])
			}
		}
		sort.Strings(links)
		if diff := cmp.Diff([]string{"/page/1", "/page/2"}, links); diff != "" {
			t.Errorf("%s local links (-want +got):\n%s", seed, diff)
		}
		local = append(local, strings.TrimSuffix(seed, "/")+"/page/1", strings.TrimSuffix(seed, "/")+"/page/2")
	}
	if m, x, o := s.Hits(); m != 12 || x != 0 || o != 0 {
		t.Errorf("after the roots: missing %d extra %d other %d; want 12, 0, 0", m, x, o)
	}
	for _, u := range local {
		if code, _ := get(u); code != http.StatusOK {
			t.Errorf("%s: %d", u, code)
		}
	}
	get(s.PageURL(0, 1)) // twice
	if code, _ := get(strings.Replace(s.PageURL(0, 2), "/page/2", "/page/3", 1)); code != http.StatusNotFound {
		t.Errorf("page 3 of 3: %d, want 404", code)
	}
	if m, x, o := s.Hits(); m != 0 || x != 1 || o != 1 {
		t.Errorf("missing %d extra %d other %d; want 0, 1, 1", m, x, o)
	}

	// the held page answers after Release only
	got := make(chan int, 1)
	go func() {
		resp, err := client.Get(s.HeldURL())
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); s.HeldRequested() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case c := <-got:
		t.Fatalf("held page answered %d before Release", c)
	default:
	}
	s.Release()
	if c := <-got; c != http.StatusOK {
		t.Errorf("held page: %d after Release", c)
	}
	s.ResetHits()
	if m, x, o := s.Hits(); m != 18 || x != 0 || o != 0 || s.HeldRequested() != 0 {
		t.Errorf("after reset: missing %d extra %d other %d held %d", m, x, o, s.HeldRequested())
	}
}
