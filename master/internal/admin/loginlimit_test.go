package admin

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// loginFrom is the login form's request with token from the client at
// remote (host:port).
func loginFrom(remote, token string) request {
	return request{
		method:  http.MethodPost,
		path:    "/login",
		body:    url.Values{"token": {token}}.Encode(),
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		remote:  remote,
	}
}

// TestLoginLimitPerClient: wrong tokens limit the client that sends them,
// an IPv4 address or an IPv6 /64, and nobody else: the admin's right token
// from another address logs in while the attacker is refused (429), its
// right token too; login links count the same way.
func TestLoginLimitPerClient(t *testing.T) {
	const (
		attacker  = "203.0.113.7:40000"
		admin     = "198.51.100.9:50000"
		attacker6 = "[2001:db8:1:2::1]:40000"
	)
	tests := []struct {
		name  string
		steps []request
		want  []int
	}{
		{"an attacker's failures do not lock the admin out",
			[]request{loginFrom(attacker, "a"), loginFrom(attacker, "b"), loginFrom(attacker, "c"), loginFrom(attacker, "d"),
				loginFrom(attacker, "e"), loginFrom(attacker, "f"), loginFrom(admin, testToken), loginFrom(attacker, testToken),
				loginFrom("203.0.113.7:40001", testToken), loginFrom("[::ffff:203.0.113.7]:1", testToken)},
			[]int{401, 401, 401, 401, 401, 429, 303, 429, 429, 429}},
		{"an IPv6 client is its /64",
			[]request{loginFrom(attacker6, "a"), loginFrom(attacker6, "b"), loginFrom(attacker6, "c"), loginFrom(attacker6, "d"),
				loginFrom(attacker6, "e"), loginFrom("[2001:db8:1:2:ffff::9]:1", testToken),
				loginFrom("[2001:db8:1:3::1]:1", testToken), loginFrom("[2001:db8:1:2::1%eth0]:1", testToken)},
			[]int{401, 401, 401, 401, 401, 429, 303, 429}},
		{"login links count per client",
			[]request{{path: "/login?link=x", remote: attacker}, {path: "/login?link=x", remote: attacker},
				{path: "/login?link=x", remote: attacker}, {path: "/login?link=x", remote: attacker},
				{path: "/login?link=x", remote: attacker}, {path: "/login?link=x", remote: attacker},
				loginFrom(attacker, testToken), loginFrom(admin, testToken)},
			[]int{401, 401, 401, 401, 401, 429, 429, 303}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, newFake(), nil)
			var got []int
			for _, r := range tt.steps {
				resp := do(s, r)
				readBody(t, resp)
				got = append(got, resp.StatusCode)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("statuses (-want +got):\n%s", d)
			}
		})
	}
}

// TestLoginLimiterBounded: the limiter holds at most max clients whatever
// the number of addresses failing; when full it lets go of the client
// nearest to having refilled, never of a limited one while another is
// less limited, and a new client is never refused.
func TestLoginLimiterBounded(t *testing.T) {
	l := loginLimiter{burst: 5, refill: 5 * time.Second, max: 8}
	attacker := clientOf("203.0.113.7:1")
	for range 6 {
		l.fail(attacker, testNow)
	}
	// rotating addresses, one failure each, a millisecond apart
	var peak int
	for i := range 1000 {
		c := clientOf(fmt.Sprintf("10.%d.%d.1:1", i/256, i%256))
		at := testNow.Add(time.Duration(i) * time.Millisecond)
		if !l.ready(c, at) {
			t.Fatalf("a new client %v refused", c)
		}
		l.fail(c, at)
		peak = max(peak, len(l.clients))
	}
	if peak > l.max {
		t.Errorf("the limiter held %d clients, max %d", peak, l.max)
	}
	at := testNow.Add(time.Second)
	got := map[string]bool{
		"attacker limited":  !l.ready(attacker, at),
		"attacker kept":     l.clients[attacker].n > 0,
		"fresh client":      l.ready(clientOf("192.0.2.55:1"), at),
		"attacker refilled": l.ready(attacker, testNow.Add(10*time.Second)),
	}
	want := map[string]bool{"attacker limited": true, "attacker kept": true, "fresh client": true, "attacker refilled": true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// a full table of clients whose failures have refilled is emptied of
	// them rather than of the one still limited
	l2 := loginLimiter{burst: 5, refill: 5 * time.Second, max: 3}
	for i := range 2 {
		l2.fail(clientOf(fmt.Sprintf("10.0.0.%d:1", i)), testNow)
	}
	for range 5 {
		l2.fail(attacker, testNow.Add(time.Minute))
	}
	l2.fail(clientOf("10.0.1.1:1"), testNow.Add(time.Minute))
	keys := map[netip.Prefix]bool{}
	for c := range l2.clients {
		keys[c] = true
	}
	if d := cmp.Diff(map[netip.Prefix]bool{attacker: true, clientOf("10.0.1.1:1"): true}, keys); d != "" {
		t.Errorf("clients kept (-want +got):\n%s", d)
	}
}

func TestClientOf(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"203.0.113.7:80", "203.0.113.7/32"},
		{"[::ffff:203.0.113.7]:80", "203.0.113.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"@", "invalid Prefix"},
		{"", "invalid Prefix"},
	}
	for _, tt := range tests {
		if got := clientOf(tt.remote).String(); got != tt.want {
			t.Errorf("clientOf(%q) = %s, want %s", tt.remote, got, tt.want)
		}
	}
}
