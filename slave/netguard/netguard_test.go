package netguard

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// ssrfVectors is the structure of security/ssrf_vectors.json.
type ssrfVectors struct {
	DeniedV4Daenney []prefixWhy `json:"dial_time_denied_ipv4_prefixes_daenney"`
	V6PolicyDaenney struct {
		AllowOnlyWithin string      `json:"allow_only_within"`
		DeniedWithinGUA []prefixWhy `json:"denied_within_global_unicast"`
	} `json:"dial_time_ipv6_policy_daenney"`
	DeniedSafeurl []prefixWhy `json:"denied_prefixes_safeurl"`
	DialerCases   []struct {
		Network string `json:"network"`
		Addr    string `json:"addr"`
		Expect  string `json:"expect"`
	} `json:"dialer_control_cases_daenney"`
	HostForms []string `json:"url_host_forms_that_must_be_blocked_safeurl"`
}

type prefixWhy struct {
	Prefix string `json:"prefix"`
	Why    string `json:"why"`
}

func loadVectors(t *testing.T) ssrfVectors {
	t.Helper()
	data, err := os.ReadFile(testutil.ConformanceFile(t, "security/ssrf_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v ssrfVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("parse ssrf_vectors.json: %v", err)
	}
	if len(v.DeniedV4Daenney) == 0 || len(v.DeniedSafeurl) == 0 || len(v.DialerCases) == 0 || len(v.HostForms) == 0 {
		t.Fatalf("ssrf_vectors.json: a section is empty or was renamed")
	}
	return v
}

// prefixDeviations are the denied prefixes of the reference lists that this
// package deliberately does not refuse as a whole, with the reason. Inside
// such a prefix an address is refused exactly when the IPv4 address it
// carries is.
var prefixDeviations = map[string]string{
	"64:ff9b::/96": "NAT64: on an IPv6-only network behind DNS64 every IPv4-only site resolves into this prefix; the embedded IPv4 address (what the NAT64 gateway connects to) is checked instead",
}

// samples returns addresses spread over p: first, last, middle and a few
// more.
func samples(p netip.Prefix) []netip.Addr {
	p = p.Masked()
	first := p.Addr()
	b := first.AsSlice()
	bits := p.Bits()
	set := func(frac func(i int) bool) netip.Addr {
		c := append([]byte(nil), b...)
		for i := bits; i < len(c)*8; i++ {
			if frac(i) {
				c[i/8] |= 0x80 >> (i % 8)
			}
		}
		a, _ := netip.AddrFromSlice(c)
		return a
	}
	return []netip.Addr{
		first,
		set(func(int) bool { return true }), // last
		set(func(i int) bool { return i == bits }),   // middle
		set(func(i int) bool { return i%3 == 0 }),    // scattered bits
		set(func(i int) bool { return i == bits+1 }), // first quarter
		set(func(i int) bool { return i >= len(b)*8-1 }),
	}
}

// embeddedV4 returns the IPv4 address carried in the last 32 bits of a.
func embeddedV4(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
}

func checkDeniedPrefixes(t *testing.T, list string, prefixes []prefixWhy) {
	t.Helper()
	for _, pw := range prefixes {
		p, err := netip.ParsePrefix(pw.Prefix)
		if err != nil {
			t.Errorf("%s: bad prefix %q: %v", list, pw.Prefix, err)
			continue
		}
		_, deviates := prefixDeviations[pw.Prefix]
		for _, a := range samples(p) {
			want := true
			if deviates {
				want = IsBlocked(embeddedV4(a))
			}
			if got := IsBlocked(a); got != want {
				t.Errorf("%s %s (%s): IsBlocked(%s) = %v, want %v", list, pw.Prefix, pw.Why, a, got, want)
			}
			if a.Is4() {
				// The IPv4-mapped and NAT64 forms reach the same IPv4 address.
				if m := netip.AddrFrom16(a.As16()); !IsBlocked(m) {
					t.Errorf("%s %s: IPv4-mapped %s not blocked", list, pw.Prefix, m)
				}
				n := netip.MustParseAddr("64:ff9b::").As16()
				copy(n[12:], a.AsSlice())
				if !IsBlocked(netip.AddrFrom16(n)) {
					t.Errorf("%s %s: NAT64 form %s not blocked", list, pw.Prefix, netip.AddrFrom16(n))
				}
			}
		}
	}
}

func TestConformanceDeniedPrefixes(t *testing.T) {
	v := loadVectors(t)
	checkDeniedPrefixes(t, "daenney ipv4", v.DeniedV4Daenney)
	checkDeniedPrefixes(t, "daenney ipv6 within 2000::/3", v.V6PolicyDaenney.DeniedWithinGUA)
	checkDeniedPrefixes(t, "safeurl", v.DeniedSafeurl)
	t.Logf("denied prefixes: %d daenney IPv4, %d daenney IPv6, %d safeurl; deviations: %v",
		len(v.DeniedV4Daenney), len(v.V6PolicyDaenney.DeniedWithinGUA), len(v.DeniedSafeurl), prefixDeviations)
}

// TestConformanceIPv6Policy checks daenney's IPv6 policy: only 2000::/3 is
// allowed; everything named outside it is refused.
func TestConformanceIPv6Policy(t *testing.T) {
	v := loadVectors(t)
	if !strings.HasPrefix(v.V6PolicyDaenney.AllowOnlyWithin, "2000::/3") {
		t.Fatalf("policy changed: %q", v.V6PolicyDaenney.AllowOnlyWithin)
	}
	outside := []string{"::", "::1", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "fec0::1", "100::1",
		"::7f00:1", "::808:808", // IPv4-compatible (deprecated)
		"64:ff9b:1::808:808", // local-use NAT64 (RFC 8215)
		"4000::1", "8000::1", "e000::1"}
	for _, s := range outside {
		if a := netip.MustParseAddr(s); !IsBlocked(a) {
			t.Errorf("IsBlocked(%s) = false, want true (outside 2000::/3)", s)
		}
	}
	// IPv4-mapped addresses (::ffff:0:0/96): daenney refuses all of them.
	// IsBlocked judges them by their IPv4 address (net.IP holds every IPv4
	// address in this form, so refusing them all would refuse all of IPv4
	// to a caller converting with netip.AddrFromSlice); Control refuses them
	// on IPv6 sockets, where Go's dialer never puts them.
	if IsBlocked(netip.MustParseAddr("::ffff:8.8.8.8")) {
		t.Errorf("IsBlocked(::ffff:8.8.8.8) = true, want false (judged as 8.8.8.8)")
	}
	if !IsBlocked(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Errorf("IsBlocked(::ffff:10.1.2.3) = false")
	}
	if err := Control(false)("tcp6", "[::ffff:8.8.8.8]:80", nil); err == nil {
		t.Errorf("Control(tcp6, [::ffff:8.8.8.8]:80) allowed an IPv4-mapped address on an IPv6 socket")
	}
}

func TestConformanceDialerCases(t *testing.T) {
	v := loadVectors(t)
	control := Control(false)
	for _, c := range v.DialerCases {
		err := control(c.Network, c.Addr, nil)
		switch {
		case c.Expect == "allow":
			if err != nil {
				t.Errorf("%s %s: got %v, want allowed", c.Network, c.Addr, err)
			}
		case strings.HasPrefix(c.Expect, "deny"):
			if err == nil {
				t.Errorf("%s %s: allowed, want %s", c.Network, c.Addr, c.Expect)
				continue
			}
			// ErrProhibitedPort: this package does not restrict ports (a
			// crawler fetches web servers on any port); the case is refused
			// for its loopback address. ErrProhibitedNetwork: the address
			// does not parse. Every other denial is a *BlockedError.
			var be *BlockedError
			if !strings.Contains(c.Expect, "Network") && !errors.As(err, &be) {
				t.Errorf("%s %s: got %T %v, want *BlockedError", c.Network, c.Addr, err, err)
			}
		default:
			t.Errorf("unknown expectation %q", c.Expect)
		}
		if err := Control(true)(c.Network, c.Addr, nil); err != nil {
			t.Errorf("allowPrivate: %s %s: %v", c.Network, c.Addr, err)
		}
	}
}

// inetAton parses an IPv4 address the way glibc's inet_aton (and so
// getaddrinfo) does: one to four parts, each decimal, octal (leading 0) or
// hex (0x), the last part filling the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32) // base 0: 0x hex, 0 octal, else decimal
		if err != nil || strings.Contains(p, "_") {
			return netip.Addr{}, false
		}
		vals = append(vals, n)
	}
	var ip uint64
	for i, n := range vals[:len(vals)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		ip |= n << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	ip |= last
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(ip))
	return netip.AddrFrom4(b), true
}

// resolveForm returns the IP a URL host form (as in
// "http://FORM") reaches once resolved: bracketed IPv6 literals parse as
// such, the rest the way getaddrinfo reads numeric IPv4 forms.
func resolveForm(form string) (netip.Addr, error) {
	host := form
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return netip.Addr{}, fmt.Errorf("unterminated IPv6 literal")
		}
		return netip.ParseAddr(host[1:end])
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a, ok := inetAton(host)
	if !ok {
		return netip.Addr{}, fmt.Errorf("not a numeric host")
	}
	return a, nil
}

// TestConformanceHostForms checks safeurl's URL host forms: each reaches the
// dialer as a resolved IP, which must be refused.
func TestConformanceHostForms(t *testing.T) {
	v := loadVectors(t)
	control := Control(false)
	for _, form := range v.HostForms {
		ip, err := resolveForm(form)
		if err != nil {
			t.Errorf("host form %q: %v", form, err)
			continue
		}
		if !IsBlocked(ip) {
			t.Errorf("host form %q resolves to %s: not blocked", form, ip)
		}
		addr := netip.AddrPortFrom(ip, 80).String()
		network := "tcp4"
		if ip.Is6() && !ip.Is4In6() {
			network = "tcp6"
		}
		var be *BlockedError
		if err := control(network, addr, nil); !errors.As(err, &be) {
			t.Errorf("host form %q: Control(%s, %s) = %v, want *BlockedError", form, network, addr, err)
		}
	}
	t.Logf("%d host forms, all blocked once resolved", len(v.HostForms))
}

func TestIsBlocked(t *testing.T) {
	tests := []struct {
		ip   string
		want bool
	}{
		// public
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.216.34", false},
		{"2001:4860:4860::8888", false},
		{"2606:4700:4700::1111", false},
		{"2001:200::1", false}, // just past 2001::/23
		{"2003::1", false},     // just past 2002::/16
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		// edges of refused IPv4 ranges
		{"9.255.255.255", false},
		{"10.0.0.0", true},
		{"10.255.255.255", true},
		{"11.0.0.0", false},
		{"100.63.255.255", false},
		{"100.64.0.0", true},
		{"100.127.255.255", true},
		{"100.128.0.0", false},
		{"126.255.255.255", false},
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"128.0.0.0", false},
		{"169.254.169.254", true}, // cloud metadata
		{"172.15.255.255", false},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"172.32.0.0", false},
		{"192.167.255.255", false},
		{"192.168.1.1", true},
		{"192.169.0.0", false},
		{"198.17.255.255", false},
		{"198.18.0.0", true},
		{"198.19.255.255", true},
		{"198.20.0.0", false},
		{"223.255.255.255", false},
		{"224.0.0.1", true},
		{"255.255.255.255", true},
		{"0.0.0.0", true},
		// IPv6
		{"::", true},
		{"::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"2001:4860:4860::8888%eth0", true}, // zoned
		{"fd00::1", true},
		{"ff02::1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::127.0.0.1", true},                 // IPv4-compatible
		{"64:ff9b::7f00:1", true},             // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true},          // NAT64 of 169.254.169.254
		{"2002:7f00:1::1", true},              // 6to4 of 127.0.0.1
		{"2002:808:808::1", true},             // 6to4 of 8.8.8.8: 6to4 refused outright
		{"2001:0:4136:e378::f7ff:fffe", true}, // Teredo
		{"2001:db8::1", true},
		{"3fff::1", true},
		{"fd00:ec2::254", true}, // AWS IMDS IPv6
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.ip)
		if got := IsBlocked(a); got != tt.want {
			t.Errorf("IsBlocked(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	if !IsBlocked(netip.Addr{}) {
		t.Errorf("IsBlocked(zero Addr) = false")
	}
	// A 16-byte net.IP (what the resolver returns for an A record) converts
	// to the IPv4-mapped form, which must be judged as IPv4.
	for _, s := range []string{"8.8.8.8", "127.0.0.1"} {
		a, _ := netip.AddrFromSlice(net.ParseIP(s))
		if got, want := IsBlocked(a), IsBlocked(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsBlocked(AddrFromSlice(net.ParseIP(%s))) = %v, want %v", s, got, want)
		}
	}
}

func TestControl(t *testing.T) {
	control := Control(false)
	tests := []struct {
		network, addr string
		blocked       bool // a *BlockedError
		fails         bool // any other error
	}{
		{"tcp4", "93.184.216.34:443", false, false},
		{"tcp", "93.184.216.34:8080", false, false},
		{"tcp6", "[2606:4700:4700::1111]:443", false, false},
		{"udp4", "8.8.8.8:53", false, false},
		{"tcp4", "127.0.0.1:80", true, false},
		{"tcp4", "10.0.0.1:80", true, false},
		{"tcp6", "[::1]:80", true, false},
		{"tcp6", "[fe80::1%eth0]:80", true, false},
		{"tcp6", "[::ffff:8.8.8.8]:80", true, false},
		{"unix", "/run/docker.sock", false, true},
		{"tcp4", "example.com:80", false, true},
		{"tcp4", "", false, true},
	}
	for _, tt := range tests {
		err := control(tt.network, tt.addr, nil)
		var be *BlockedError
		isBlocked := errors.As(err, &be)
		switch {
		case tt.blocked && !isBlocked:
			t.Errorf("Control(%s, %s) = %v, want *BlockedError", tt.network, tt.addr, err)
		case tt.fails && (err == nil || isBlocked):
			t.Errorf("Control(%s, %s) = %v, want a non-BlockedError error", tt.network, tt.addr, err)
		case !tt.blocked && !tt.fails && err != nil:
			t.Errorf("Control(%s, %s) = %v, want nil", tt.network, tt.addr, err)
		}
		if isBlocked && be.Addr != tt.addr {
			t.Errorf("BlockedError.Addr = %q, want %q", be.Addr, tt.addr)
		}
	}
	want := "netguard: connection to non-public address 127.0.0.1:80 refused"
	if got := (&BlockedError{Addr: "127.0.0.1:80"}).Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestDialer(t *testing.T) {
	d := Dialer(7*time.Second, false)
	if d.Timeout != 7*time.Second || d.KeepAlive != 30*time.Second || d.Control == nil {
		t.Errorf("Dialer = %+v", d)
	}
}

// TestDialLoopback dials a real server on 127.0.0.1 through http.Client.
func TestDialLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	client := func(allowPrivate bool) *http.Client {
		tr := &http.Transport{DialContext: Dialer(5*time.Second, allowPrivate).DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}

	_, err := client(false).Get(srv.URL)
	var be *BlockedError
	if !errors.As(err, &be) {
		t.Fatalf("GET %s with allowPrivate=false: err = %v, want a *BlockedError", srv.URL, err)
	}
	if !strings.HasPrefix(be.Addr, "127.0.0.1:") {
		t.Errorf("BlockedError.Addr = %q", be.Addr)
	}

	// "localhost" resolves to a loopback address: refused after resolution.
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if _, err := client(false).Get(u); !errors.As(err, &be) {
		t.Errorf("GET %s with allowPrivate=false: err = %v, want a *BlockedError", u, err)
	}

	resp, err := client(true).Get(srv.URL)
	if err != nil {
		t.Fatalf("GET %s with allowPrivate=true: %v", srv.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("body = %q", body)
	}

	// The raw dialer reports the same error without http in between.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dialer(time.Second, false).DialContext(ctx, "tcp", srv.Listener.Addr().String()); !errors.As(err, &be) {
		t.Errorf("DialContext: err = %v, want a *BlockedError", err)
	}
}
