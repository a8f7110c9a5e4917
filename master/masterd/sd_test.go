package masterd

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// defaultSDAllow is admin.sd_allow's default, parsed.
func defaultSDAllow(t testing.TB) []netip.Prefix {
	t.Helper()
	cfg := config.Default()
	return cfg.SDAllowPrefixes()
}

func TestSDTarget(t *testing.T) {
	lan := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00:1::/64")}
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	for _, tc := range []struct {
		addr  string
		allow []netip.Prefix // nil: the default
		want  string         // the target, "" when refused
		why   string         // a substring of the refusal
	}{
		// listed
		{addr: "10.0.0.7:9100", want: "10.0.0.7:9100"},
		{addr: "192.168.1.20:9100", want: "192.168.1.20:9100"},
		{addr: "172.31.255.1:9100", want: "172.31.255.1:9100"},
		{addr: "127.0.0.1:43567", allow: everything, want: "127.0.0.1:43567"},
		{addr: "[::1]:9100", allow: everything, want: "[::1]:9100"},
		{addr: "[fd12:3456::7]:9100", want: "[fd12:3456::7]:9100"},
		{addr: "[::ffff:10.0.0.7]:9100", want: "10.0.0.7:9100"},
		{addr: "10.0.0.7:9100", allow: lan, want: "10.0.0.7:9100"},
		{addr: "[fd00:1::9]:9100", allow: lan, want: "[fd00:1::9]:9100"},
		{addr: "203.0.113.5:9100", allow: everything, want: "203.0.113.5:9100"},
		// loopback: not by default
		{addr: "127.0.0.1:43567", why: "outside admin.sd_allow"},
		{addr: "[::1]:9100", why: "outside admin.sd_allow"},
		// metadata and link-local, even when every address is allowed
		{addr: "169.254.169.254:80", why: "link-local"},
		{addr: "169.254.169.254:80", allow: everything, why: "link-local"},
		{addr: "169.254.170.2:80", allow: everything, why: "link-local"},
		{addr: "[::ffff:169.254.169.254]:80", allow: everything, why: "link-local"},
		{addr: "[64:ff9b::a9fe:a9fe]:80", allow: everything, why: "NAT64 to a link-local"},
		{addr: "[fe80::1]:9100", allow: everything, why: "link-local"},
		{addr: "[fe80::1%eth0]:9100", allow: everything, why: "zone"},
		{addr: "[fd00:ec2::254]:80", why: "metadata"},
		{addr: "100.100.100.200:80", allow: everything, why: "metadata"},
		{addr: "168.63.129.16:80", allow: everything, why: "metadata"},
		{addr: "0.0.0.0:9100", allow: everything, why: "unspecified"},
		{addr: "[::]:9100", allow: everything, why: "unspecified"},
		{addr: "224.0.0.1:9100", allow: everything, why: "multicast"},
		{addr: "[ff02::1]:9100", allow: everything, why: "multicast"},
		{addr: "255.255.255.255:9100", allow: everything, why: "broadcast"},
		// outside the list
		{addr: "8.8.8.8:53", why: "outside admin.sd_allow"},
		{addr: "[2001:db8::1]:9100", why: "outside admin.sd_allow"},
		{addr: "10.0.1.7:9100", allow: lan, why: "outside admin.sd_allow"},
		{addr: "192.168.1.20:9100", allow: lan, why: "outside admin.sd_allow"},
		{addr: "127.0.0.1:9100", allow: lan, why: "outside admin.sd_allow"},
		{addr: "10.0.0.7:9100", allow: []netip.Prefix{}, why: "outside admin.sd_allow"},
		// names and malformed
		{addr: "pi1:9100", why: "not a literal IP:port"},
		{addr: "localhost:9100", why: "not a literal IP:port"},
		{addr: "metadata.google.internal:80", allow: everything, why: "not a literal IP:port"},
		{addr: "10.0.0.7", why: "not a literal IP:port"},
		{addr: ":9100", why: "not a literal IP:port"},
		{addr: "10.0.0.7:", why: "not a literal IP:port"},
		{addr: "10.0.0.7:65536", why: "not a literal IP:port"},
		{addr: "10.0.0.7:0", why: "port 0"},
		{addr: "010.0.0.7:9100", why: "not a literal IP:port"},
		{addr: "0x0a000007:9100", why: "not a literal IP:port"},
		{addr: "167772167:9100", why: "not a literal IP:port"},
		{addr: "::1:9100", why: "not a literal IP:port"},
		{addr: "http://10.0.0.7:9100/metrics", why: "not a literal IP:port"},
		{addr: "10.0.0.7:9100\nx", why: "not a literal IP:port"},
	} {
		allow := tc.allow
		if allow == nil {
			allow = defaultSDAllow(t)
		}
		got, err := sdTarget(tc.addr, allow)
		switch {
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("sdTarget(%q, %v) = %q, %v; want %q", tc.addr, allow, got, err, tc.want)
		case tc.want == "" && (err == nil || got != "" || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("sdTarget(%q, %v) = %q, %v; want refused: %s", tc.addr, allow, got, err, tc.why)
		}
	}
}

// FuzzSDTarget: whatever a heartbeat says, a listed target is a
// canonical IP:port inside the list and never link-local, multicast,
// unspecified or a metadata address.
func FuzzSDTarget(f *testing.F) {
	for _, s := range []string{"10.0.0.7:9100", "169.254.169.254:80", "[::ffff:169.254.169.254]:80",
		"[64:ff9b::a9fe:a9fe]:80", "[fe80::1%eth0]:1", "pi1:9100", "[fd00:ec2::254]:80", "0.0.0.0:1"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	def := defaultSDAllow(f)
	f.Fuzz(func(t *testing.T, addr string, all bool) {
		allow := def
		if all {
			allow = everything
		}
		got, err := sdTarget(addr, allow)
		if err != nil {
			if got != "" {
				t.Fatalf("refused %q with a target %q", addr, got)
			}
			return
		}
		ap, perr := netip.ParseAddrPort(got)
		if perr != nil || ap.String() != got || ap.Addr().Is4In6() || ap.Addr().Zone() != "" || ap.Port() == 0 {
			t.Fatalf("%q listed as %q: not a canonical IP:port", addr, got)
		}
		ip := ap.Addr()
		if ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() || neverListed(ip) != nil {
			t.Fatalf("%q listed as %q", addr, got)
		}
		in := false
		for _, p := range allow {
			in = in || p.Contains(ip)
		}
		if !in {
			t.Fatalf("%q listed as %q, outside %v", addr, got, allow)
		}
	})
}

// TestScrapeTargets has slaves heartbeat with honest and hostile metrics
// addresses: /api/v1/sd lists only the allowed ones, and the log names
// each slave left out.
func TestScrapeTargets(t *testing.T) {
	ctx := t.Context()
	rdb := testRedisClient(t)
	crawl := testutil.CrawlName("sd")
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	front, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, DeadAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Crawl.Name = crawl
	cfg.Admin.SDAllow = []string{"10.0.0.0/24", "127.0.0.0/8"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m := New(&cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	m.front = front
	for slave, addr := range map[string]string{
		"lan":      "10.0.0.7:9100",
		"local":    "127.0.0.1:40001",
		"mapped":   "[::ffff:10.0.0.8]:9100",
		"none":     "",
		"metadata": "169.254.169.254:80",
		"wan":      "8.8.8.8:53",
		"named":    "evil.example:9100",
		"office":   "192.168.1.5:9100",
	} {
		if err := front.Heartbeat(ctx, events.Heartbeat{Slave: slave, MetricsAddr: addr}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.scrapeTargets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := func(slave, addr string) admin.SDTarget {
		return admin.SDTarget{Targets: []string{addr},
			Labels: map[string]string{"job": "redcrawl-slave", "crawl": crawl, "slave": slave}}
	}
	want := []admin.SDTarget{target("lan", "10.0.0.7:9100"), target("local", "127.0.0.1:40001"), target("mapped", "10.0.0.8:9100")}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("targets (-want +got):\n%s", d)
	}
	l := logs.String()
	for _, slave := range []string{"metadata", "wan", "named", "office"} {
		if !strings.Contains(l, "slave="+slave+" ") {
			t.Errorf("no log line for %s's refused address:\n%s", slave, l)
		}
	}
	for _, slave := range []string{"lan", "local", "mapped", "none"} {
		if strings.Contains(l, "slave="+slave+" ") {
			t.Errorf("a log line for %s:\n%s", slave, l)
		}
	}
}
