package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cgoChildEnv marks the child process that runs the cgo half of
// TestResolvers under GODEBUG=netdns=cgo.
const cgoChildEnv = "NETGUARD_TEST_CGO_CHILD"

// errNoDNS is what the pure-Go test resolver's DNS "server" answers: the
// tests stay on loopback.
var errNoDNS = errors.New("netguard test: no DNS server (loopback-only test)")

// goResolver is the pure-Go resolver, with /etc/hosts but no DNS server.
func goResolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errNoDNS
		},
	}
}

// TestResolvers dials the URL host forms of ssrf_vectors.json that must be
// blocked through DialerWith, directly and as a redirect target, with the
// pure-Go resolver (PreferGo true) and with the cgo resolver (PreferGo
// false, libc getaddrinfo, in a child process run with GODEBUG=netdns=cgo
// since the choice is made once per process). Listeners on loopback
// addresses make a connection succeed if the guard let one through; each
// dial must be refused with a *BlockedError or fail to resolve, and no
// listener may see a connection.
func TestResolvers(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range []struct {
		name string
		cgo  bool
	}{{"go", false}, {"cgo", true}} {
		t.Run(tc.name, func(t *testing.T) {
			res := goResolver()
			if tc.cgo {
				if !cgoResolverBuilt {
					t.Skip("the cgo resolver is not built in (CGO_ENABLED=0 or the netgo tag): only the pure-Go resolver is tested")
				}
				if os.Getenv(cgoChildEnv) == "" {
					runCgoChild(t, "^TestResolvers$/^cgo$")
					return
				}
				res = &net.Resolver{PreferGo: false}
				logCgoResolver(t, res)
			}
			t.Run("host_forms", func(t *testing.T) { dialHostForms(t, v.HostForms, res) })
			t.Run("redirect", func(t *testing.T) { redirectToHostForms(t, res) })
		})
	}
}

// runCgoChild runs the test binary again on the tests matching run, with
// GODEBUG=netdns=cgo, and fails when they fail.
func runCgoChild(t *testing.T, run string) {
	t.Helper()
	var debug []string
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if kv != "" && !strings.HasPrefix(kv, "netdns=") {
			debug = append(debug, kv)
		}
	}
	debug = append(debug, "netdns=cgo")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), cgoChildEnv+"=1", "GODEBUG="+strings.Join(debug, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("child process (GODEBUG=%s):\n%s", strings.Join(debug, ","), out)
	if err != nil {
		t.Fatalf("child process: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestResolvers/cgo") {
		t.Fatalf("child process did not run the cgo tests")
	}
}

// logCgoResolver logs whether the resolver reads legacy numeric IPv4 forms
// as glibc's getaddrinfo does (the pure-Go resolver does not).
func logCgoResolver(t *testing.T, res *net.Resolver) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := res.LookupNetIP(ctx, "ip4", "2130706433")
	t.Logf("cgo resolver: LookupNetIP(2130706433) = %v, %v (glibc: 127.0.0.1)", addrs, err)
}

// formHost returns the host of a URL host form ("017700000001:80/" ->
// "017700000001", "[::1]/server-status" -> "::1").
func formHost(form string) string {
	host, _, _ := strings.Cut(form, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// countingListeners listens on port (0: any) of each loopback address it
// can bind, and counts the connections accepted.
type countingListeners struct {
	port     int
	accepted atomic.Int64
	ls       []net.Listener
	wg       sync.WaitGroup
}

func listenLoopback(t *testing.T, ips ...string) *countingListeners {
	t.Helper()
	cl := &countingListeners{}
	for i, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(cl.port)))
		if err != nil {
			if i == 0 {
				t.Fatal(err)
			}
			t.Logf("no listener on %s: %v", ip, err)
			continue
		}
		if i == 0 {
			cl.port = l.Addr().(*net.TCPAddr).Port
		}
		cl.ls = append(cl.ls, l)
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				cl.accepted.Add(1)
				c.Close()
			}
		}()
	}
	t.Cleanup(cl.close)
	return cl
}

// close stops the listeners and waits for their accept loops.
func (cl *countingListeners) close() {
	for _, l := range cl.ls {
		l.Close()
	}
	cl.wg.Wait()
}

// refusedOrUnresolved reports whether err is a refusal by the guard or a
// failed name lookup, and which.
func refusedOrUnresolved(err error) (string, bool) {
	var be *BlockedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &be):
		return "blocked", true
	case errors.As(err, &dnsErr):
		return "unresolved", true
	}
	return "", false
}

func dialHostForms(t *testing.T, forms []string, res *net.Resolver) {
	// Every loopback address a form reaches, so that an unguarded dial
	// would connect; 0.0.0.0 and :: reach 127.0.0.1 and ::1 on Linux.
	cl := listenLoopback(t, "127.0.0.1", "::1", "127.127.127.127")
	port := strconv.Itoa(cl.port)
	guarded := DialerWith(Options{Timeout: 5 * time.Second, Resolver: res})
	open := DialerWith(Options{Timeout: 5 * time.Second, Resolver: res, AllowPrivate: true})
	var wouldConnect, expected int64
	counts := map[string]int{}
	for _, form := range forms {
		host := formHost(form)
		addr := net.JoinHostPort(host, port)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Without the guard, first, but only towards loopback and
		// unspecified addresses (never out of the machine): this shows the
		// connection would succeed.
		if ip, err := resolveForm(form); err == nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			if c, err := open.DialContext(ctx, "tcp", addr); err == nil {
				c.Close()
				wouldConnect++
				expected++
			}
		}
		c, err := guarded.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			expected++ // so that the final count does not fail twice
			t.Errorf("host form %q: guarded dial to %s connected", form, addr)
			continue
		}
		kind, ok := refusedOrUnresolved(err)
		if !ok {
			t.Errorf("host form %q: guarded dial to %s: %v, want a *BlockedError or a DNS error", form, addr, err)
			continue
		}
		counts[kind]++
	}
	// A dial returns once the kernel has completed the handshake, which
	// can be before the accept loop has taken the connection: wait
	// (bounded) for the accept loops to catch up before counting.
	for deadline := time.Now().Add(5 * time.Second); cl.accepted.Load() < expected && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cl.close()
	if got := cl.accepted.Load(); got != expected {
		t.Errorf("listeners accepted %d connections, want %d (only the unguarded dials)", got, expected)
	}
	t.Logf("%d host forms: %d refused by the guard after resolution, %d did not resolve; %d would have connected without the guard",
		len(forms), counts["blocked"], counts["unresolved"], wouldConnect)
}

// redirectToHostForms follows a redirect from a server taken as public (the
// one address the transport dials without the guard) to internal
// addresses spelled as host forms: each redirect hop must be refused.
func redirectToHostForms(t *testing.T, res *net.Resolver) {
	var internalHits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		io.WriteString(w, "secret")
	}))
	defer internal.Close()
	port := strconv.Itoa(internal.Listener.Addr().(*net.TCPAddr).Port)

	var target atomic.Value // string
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.Load().(string), http.StatusFound)
	}))
	defer public.Close()
	publicAddr := public.Listener.Addr().String()

	guarded := DialerWith(Options{Timeout: 5 * time.Second, Resolver: res})
	open := DialerWith(Options{Timeout: 5 * time.Second, Resolver: res, AllowPrivate: true})
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == publicAddr {
				return open.DialContext(ctx, network, addr)
			}
			return guarded.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	for _, host := range []string{"0x7f000001", "2130706433", "127.1", "0177.0.0.1", "017700000001", "0x7f.0x0.0x0.0x1", "127.0.0.1", "[::ffff:127.0.0.1]", "0.0.0.0"} {
		to := fmt.Sprintf("http://%s:%s/secret", host, port)
		target.Store(to)
		resp, err := client.Get(public.URL)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Errorf("redirect to %s: got %s %q, want the hop refused", to, resp.Status, body)
			continue
		}
		kind, ok := refusedOrUnresolved(err)
		if !ok {
			t.Errorf("redirect to %s: %v, want a *BlockedError or a DNS error", to, err)
			continue
		}
		t.Logf("redirect to %s: %s", to, kind)
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal server was reached %d times", n)
	}

	// Without the guard the internal server is reachable, so the refusals
	// above are the guard's.
	openClient := &http.Client{Transport: &http.Transport{DialContext: open.DialContext, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := openClient.Get(internal.URL)
	if err != nil {
		t.Fatalf("unguarded GET %s: %v", internal.URL, err)
	}
	resp.Body.Close()
	if n := internalHits.Load(); n != 1 {
		t.Errorf("unguarded GET: the internal server was reached %d times, want 1", n)
	}
}

func TestDialerWith(t *testing.T) {
	r := goResolver()
	d := DialerWith(Options{Timeout: 3 * time.Second, Resolver: r})
	if d.Timeout != 3*time.Second || d.KeepAlive != 30*time.Second || d.Resolver != r || d.Control == nil {
		t.Errorf("DialerWith = %+v", d)
	}
	if err := d.Control("tcp4", "127.0.0.1:80", nil); err == nil {
		t.Errorf("DialerWith(AllowPrivate false).Control allowed 127.0.0.1")
	}
	if err := DialerWith(Options{AllowPrivate: true}).Control("tcp4", "127.0.0.1:80", nil); err != nil {
		t.Errorf("DialerWith(AllowPrivate true).Control: %v", err)
	}
	if d := Dialer(time.Second, false); d.Resolver != nil {
		t.Errorf("Dialer set a resolver: %+v", d.Resolver)
	}
}
