package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPool builds a pool and closes its idle connections with the test.
func newPool(t *testing.T, opt Options) *Pool {
	t.Helper()
	p, err := New(opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func acquire(t *testing.T, p *Pool, host string) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.Acquire(ctx, host)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", host, err)
	}
	return s
}

// sessionOf acquires until it gets a session of the proxy shown as want
// (at most 20 tries).
func sessionOf(t *testing.T, p *Pool, want string) *Session {
	t.Helper()
	for range 20 {
		if s := acquire(t, p, ""); s.Proxy() == want {
			return s
		}
	}
	t.Fatalf("no session of %s handed out", want)
	return nil
}

func writeFile(t *testing.T, path, content string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// a distinct modification time whatever the file system's granularity
	mt := time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func TestParseProxy(t *testing.T) {
	type out struct{ Key, Display string }
	tests := []struct {
		raw  string
		want out
	}{
		{"direct", out{"direct", "direct"}},
		{"http://127.0.0.1", out{"http://127.0.0.1:80", "http://127.0.0.1:80"}},
		{"HTTPS://127.0.0.1:8443/", out{"https://127.0.0.1:8443", "https://127.0.0.1:8443"}},
		{"socks5://u:pw@127.0.0.1", out{"socks5://u:pw@127.0.0.1:1080", "socks5://u:xxxxx@127.0.0.1:1080"}},
		{" http://u:p%40ss@[::1]:3128 ", out{"http://u:p%40ss@[::1]:3128", "http://u:xxxxx@[::1]:3128"}},
	}
	for _, tc := range tests {
		sp, err := parseProxy(tc.raw)
		if err != nil {
			t.Errorf("parseProxy(%q): %v", tc.raw, err)
			continue
		}
		if d := cmp.Diff(tc.want, out{sp.key, sp.display}); d != "" {
			t.Errorf("parseProxy(%q) (-want +got):\n%s", tc.raw, d)
		}
		msg := sp.scrub("error: " + strings.Join(sp.secrets, " / "))
		for _, sec := range sp.secrets {
			if strings.Contains(msg, sec) {
				t.Errorf("scrub left the password %q in %q", sec, msg)
			}
		}
	}
}

func TestNewValidation(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "proxies.txt")
	writeFile(t, bad, "# list\nhttp://127.0.0.1:1\nftp://u:pw9secret@127.0.0.1:2\n", 1)
	tests := []struct {
		name string
		opt  Options
		want string // substring of the error, "" for none
	}{
		{"defaults", Options{}, ""},
		{"all kinds", Options{Proxies: []string{"http://127.0.0.1:1", "https://127.0.0.1:2", "socks5://u:p@127.0.0.1", "direct"}}, ""},
		{"scheme", Options{Proxies: []string{"ftp://127.0.0.1:21"}}, `unsupported scheme "ftp"`},
		{"no host", Options{Proxies: []string{"http://:8080"}}, "missing host"},
		{"port", Options{Proxies: []string{"http://u:pw9secret@127.0.0.1:99999"}}, `parse proxy "http://u:xxxxx@127.0.0.1:99999": invalid port`},
		{"unparsable", Options{Proxies: []string{"http://u:pw9secret@[::1"}}, `parse proxy "http://u:xxxxx@[::1"`},
		{"path", Options{Proxies: []string{"http://127.0.0.1:8080/x"}}, "no path"},
		{"regex", Options{BanBodyPattern: "(captcha"}, "compile ban body pattern"},
		{"status", Options{BanStatuses: []int{42}}, "invalid ban status 42"},
		{"user agent", Options{UserAgents: []string{"a\nb"}}, "control character"},
		{"missing file", Options{ProxyFile: filepath.Join(dir, "none.txt")}, "stat proxy file"},
		{"bad line", Options{ProxyFile: bad}, "proxies.txt:3: parse proxy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.opt)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				p.CloseIdleConnections()
			}
			if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("New: error %q, want one containing %q", got, tc.want)
			}
			if strings.Contains(got, "pw9secret") {
				t.Errorf("the error shows the password: %q", got)
			}
		})
	}
}

// TestSpread: requests through two real HTTP proxies (one requiring
// credentials) go round-robin, not pinned by keep-alive, and a host sticks
// to its session for StickyRequests requests.
func TestSpread(t *testing.T) {
	tg := newTarget(t)
	a := newFwdProxy(t, "a", "", "")
	b := newFwdProxy(t, "b", "bob", "s3cret-pw")
	tests := []struct {
		name   string
		sticky int
		want   []string
	}{
		{"pick each time", -1, []string{"a", "b", "a", "b", "a", "b", "a", "b"}},
		{"sticky 3", 3, []string{"a", "a", "a", "b", "b", "b", "a", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, Options{Proxies: []string{a.url(), b.url()}, StickyRequests: tc.sticky, PoolSize: 2})
			for i := range len(tc.want) {
				s := acquire(t, p, "127.0.0.1")
				st, body, err := get(t, s, tg.srv.URL+"/")
				if v := p.Report(s, Result{Status: st, Err: err, Body: []byte(body)}); err != nil || st != 200 || v.Banned {
					t.Fatalf("request %d via %s: status %d, err %v, verdict %+v", i, s.Proxy(), st, err, v)
				}
			}
			if d := cmp.Diff(tc.want, tg.takeVia()); d != "" {
				t.Errorf("proxies that carried the requests (-want +got):\n%s", d)
			}
			if n := b.authFails.Load(); n != 0 {
				t.Errorf("proxy b refused %d requests for bad credentials", n)
			}
		})
	}
}

// TestSOCKS5: requests through a real SOCKS5 server, with and without
// credentials; bad credentials are a connection error.
func TestSOCKS5(t *testing.T) {
	tg := newTarget(t)
	open := newSocks(t, "", "")
	authed := newSocks(t, "alice", "s0cks-pw")
	tests := []struct {
		name   string
		server *socksServer
		url    string
		wantOK bool
	}{
		{"no auth", open, open.url(), true},
		{"user pass", authed, authed.url(), true},
		{"wrong password", authed, "socks5://alice:wrong-pw@" + authed.ln.Addr().String(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, Options{Proxies: []string{tc.url}})
			s := acquire(t, p, "127.0.0.1")
			st, body, err := get(t, s, tg.srv.URL+"/")
			v := p.Report(s, Result{Status: st, Err: err})
			if !tc.wantOK {
				if err == nil || !strings.HasPrefix(v.Reason, "connection error") || v.Banned {
					t.Fatalf("want a connection error, got status %d, err %v, verdict %+v", st, err, v)
				}
				if got := p.Proxies()[0].State; got != StateCooling {
					t.Errorf("proxy state %q after a connection error, want cooling", got)
				}
				return
			}
			if err != nil || st != 200 || body != "ok" {
				t.Fatalf("status %d, body %q, err %v", st, body, err)
			}
			// the target saw the connection the SOCKS server made
			addrs := tg.remoteAddrs()
			if last := addrs[len(addrs)-1]; !slices.Contains(tc.server.targetAddrs(), last) {
				t.Errorf("request came from %s, not through the SOCKS server (%v)", last, tc.server.targetAddrs())
			}
		})
	}
	if authed.authFails.Load() != 1 {
		t.Errorf("auth failures %d, want 1", authed.authFails.Load())
	}
}

// TestBanCooldown: a proxy answering 403 or a captcha page is banned,
// traffic moves to the other proxy, it comes back after the cooldown, a
// second ban in a row doubles the cooldown, a success resets the count.
func TestBanCooldown(t *testing.T) {
	tests := []struct {
		name       string
		mode       int32
		wantReason string
	}{
		{"status", modeBan, "ban status 403"},
		{"captcha", modeCaptcha, "body matches the ban pattern"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			a := newFwdProxy(t, "a", "", "")
			b := newFwdProxy(t, "b", "", "")
			clk := newClock()
			p := newPool(t, Options{
				Proxies: []string{a.url(), b.url()}, StickyRequests: -1,
				BanBodyPattern: "(?i)captcha", Now: clk.Now,
			})
			do := func(n int) {
				t.Helper()
				for range n {
					s := acquire(t, p, "127.0.0.1")
					st, body, err := get(t, s, tg.srv.URL+"/")
					if v := p.Report(s, Result{Status: st, Err: err, Body: []byte(body)}); v.Banned || err != nil {
						t.Fatalf("unexpected ban or error via %s: %+v, %v", s.Proxy(), v, err)
					}
				}
			}
			ban := func() {
				t.Helper()
				a.mode.Store(tc.mode)
				s := sessionOf(t, p, a.srv.URL)
				st, body, err := get(t, s, tg.srv.URL+"/")
				v := p.Report(s, Result{Status: st, Err: err, Body: []byte(body)})
				if d := cmp.Diff(Verdict{Banned: true, Reason: tc.wantReason}, v); d != "" {
					t.Fatalf("verdict (-want +got):\n%s", d)
				}
				a.mode.Store(modeForward)
			}
			status := func(want ...ProxyStatus) {
				t.Helper()
				if d := cmp.Diff(want, p.Proxies(), cmpopts.IgnoreFields(ProxyStatus{}, "Uses")); d != "" {
					t.Errorf("proxies (-want +got):\n%s", d)
				}
			}
			start := clk.Now()
			ban()
			status(ProxyStatus{URL: a.srv.URL, State: StateCooling, Errors: 1, CoolingUntil: start.Add(30 * time.Second)},
				ProxyStatus{URL: b.srv.URL, State: StateUp})
			tg.takeVia()
			do(4)
			if d := cmp.Diff([]string{"b", "b", "b", "b"}, tg.takeVia()); d != "" {
				t.Errorf("while a cools down (-want +got):\n%s", d)
			}
			clk.Add(31 * time.Second)
			ban() // banned again at once: twice the cooldown
			status(ProxyStatus{URL: a.srv.URL, State: StateCooling, Errors: 2, CoolingUntil: clk.Now().Add(60 * time.Second)},
				ProxyStatus{URL: b.srv.URL, State: StateUp})
			clk.Add(59 * time.Second)
			tg.takeVia()
			do(2)
			if d := cmp.Diff([]string{"b", "b"}, tg.takeVia()); d != "" {
				t.Errorf("before the second cooldown ends (-want +got):\n%s", d)
			}
			clk.Add(2 * time.Second)
			do(4)
			if d := cmp.Diff([]string{"a", "b", "a", "b"}, tg.takeVia()); d != "" {
				t.Errorf("after the cooldown (-want +got):\n%s", d)
			}
			status(ProxyStatus{URL: a.srv.URL, State: StateUp}, ProxyStatus{URL: b.srv.URL, State: StateUp})
		})
	}
}

// TestRetire: MaxErrors consecutive errors retire a proxy (reports while
// it cools down do not count), every state change is an event, RetireProxy
// retires by the shown URL, sessions retire after MaxErrors errors or
// MaxUses uses.
func TestRetire(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	const a, b = "http://127.0.0.1:1", "http://u:xxxxx@127.0.0.1:2"
	p := newPool(t, Options{
		Proxies: []string{a, "http://u:pw@127.0.0.1:2"}, MaxErrors: 3, StickyRequests: -1, PoolSize: 1,
		Now: clk.Now, OnEvent: rec.on,
	})
	boom := errors.New("connection refused")
	for round := range 3 {
		s := sessionOf(t, p, a)
		for range 3 { // one failure and two more from requests in flight
			p.Report(s, Result{Err: boom})
		}
		if round < 2 {
			clk.Add(time.Duration(30<<round)*time.Second + time.Second)
		}
	}
	if !p.RetireProxy(b) || p.RetireProxy(b) {
		t.Error("RetireProxy: want true, then false")
	}
	want := []Event{
		{Proxy: a, State: StateAdded},
		{Proxy: b, State: StateAdded},
		{Proxy: a, State: StateCooling, Reason: "connection error: connection refused", Errors: 1},
		{Proxy: a, State: StateUp, Reason: "cooldown over", Errors: 1},
		{Proxy: a, State: StateCooling, Reason: "connection error: connection refused", Errors: 2},
		{Proxy: a, State: StateUp, Reason: "cooldown over", Errors: 2},
		{Proxy: a, State: StateRetired, Reason: "3 consecutive errors, last: connection error: connection refused", Errors: 3},
		{Proxy: b, State: StateRetired, Reason: "retired by an admin"},
	}
	got := rec.take()
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(Event{}, "At", "Uses")); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with every proxy retired: %v, want deadline exceeded", err)
	}
}

func TestSessionRetirement(t *testing.T) {
	t.Run("max errors", func(t *testing.T) {
		clk := newClock()
		p := newPool(t, Options{MaxErrors: 3, PoolSize: 1, StickyRequests: -1, Now: clk.Now})
		s := acquire(t, p, "")
		for range 3 {
			p.Report(s, Result{Err: errors.New("reset")})
		}
		clk.Add(time.Minute)
		s2 := acquire(t, p, "")
		if s2.ID() == s.ID() {
			t.Errorf("session %s kept after 3 errors", s.ID())
		}
		if got := p.Proxies()[0]; got.State != StateUp || got.Errors != 1 {
			t.Errorf("direct route %+v, want up with 1 error (in-flight reports do not count)", got)
		}
	})
	t.Run("max uses", func(t *testing.T) {
		p := newPool(t, Options{MaxUses: 3, PoolSize: 1, StickyRequests: -1, UserAgents: []string{"ua1", "ua2"}})
		var got []string
		for range 7 {
			s := acquire(t, p, "h")
			got = append(got, s.ID()+" "+s.UserAgent())
		}
		want := []string{"s1 ua1", "s1 ua1", "s1 ua1", "s2 ua2", "s2 ua2", "s2 ua2", "s3 ua1"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("sessions (-want +got):\n%s", d)
		}
	})
	t.Run("ban retires the session", func(t *testing.T) {
		clk := newClock()
		p := newPool(t, Options{PoolSize: 1, Now: clk.Now})
		s := acquire(t, p, "h")
		if v := p.Report(s, Result{Status: 429}); !v.Banned {
			t.Fatalf("429 not a ban: %+v", v)
		}
		clk.Add(time.Minute)
		if s2 := acquire(t, p, "h"); s2.ID() == s.ID() {
			t.Error("banned session handed out again")
		}
	})
	t.Run("neutral and success", func(t *testing.T) {
		p := newPool(t, Options{PoolSize: 1})
		s := acquire(t, p, "h")
		for _, r := range []Result{{}, {Status: 200}, {Status: 500}, {Status: 302}} {
			if v := p.Report(s, r); v != (Verdict{}) {
				t.Errorf("Report(%+v) = %+v, want no error", r, v)
			}
		}
		if v := p.Report(nil, Result{Status: 403}); v != (Verdict{}) {
			t.Errorf("Report(nil) = %+v", v)
		}
	})
}

// TestAllDown: with every proxy cooling down Acquire waits, logs the
// warning once, returns ctx.Err() when ctx ends and a session when a
// cooldown ends.
func TestAllDown(t *testing.T) {
	var logs syncBuffer
	clk := newClock()
	p := newPool(t, Options{
		Proxies: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, StickyRequests: -1,
		Logger: newLogger(&logs), Now: clk.Now,
	})
	for range 2 {
		p.Report(acquire(t, p, ""), Result{Status: 403})
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := p.Acquire(ctx, "")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire: %v, want deadline exceeded", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx, "")
		got <- err
	}()
	for i := 0; ; i++ { // wait for the goroutine to wait
		p.mu.Lock()
		n := p.waiting
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if i == 1000 {
			t.Fatal("Acquire never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	clk.Add(31 * time.Second)
	p.tick(ctx)
	if err := <-got; err != nil {
		t.Fatalf("Acquire after the cooldown: %v", err)
	}
	if n := strings.Count(logs.String(), "all proxies down"); n != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "usable again") {
		t.Errorf("no recovery line:\n%s", logs.String())
	}
}

// TestAllDownRealTime: short real cooldowns with Run running; Acquire
// returns once a cooldown ends.
func TestAllDownRealTime(t *testing.T) {
	p := newPool(t, Options{
		Proxies: []string{"http://127.0.0.1:1", "socks5://127.0.0.1:2"}, StickyRequests: -1,
		CooldownBase: 30 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	for range 2 {
		p.Report(acquire(t, p, ""), Result{Status: 429})
	}
	if _, err := p.Acquire(ctx, ""); err != nil {
		t.Errorf("Acquire: %v", err)
	}
	cancel()
	<-done
}

// TestProxyFileReload: added proxies appear, removed ones stop being handed
// out, unchanged ones keep their state, an invalid line keeps the previous
// list; Run polls the file.
func TestProxyFileReload(t *testing.T) {
	var logs syncBuffer
	rec := newRecorder()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "proxies.txt")
	const a, b, c = "http://127.0.0.1:1", "http://127.0.0.1:2", "socks5://127.0.0.1:3"
	writeFile(t, path, "# proxies\n"+a+"\n\n"+b+"\n", 1)
	p := newPool(t, Options{ProxyFile: path, Logger: newLogger(&logs), OnEvent: rec.on, Now: clk.Now, ReloadInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	p.Report(sessionOf(t, p, a), Result{Status: 403})
	if s := acquire(t, p, "example.org"); s.Proxy() != b {
		t.Fatalf("sticky session on %s, want %s", s.Proxy(), b)
	}
	rec.take()

	writeFile(t, path, a+"\n"+c+"\n", 2)
	p.tick(ctx)
	want := []ProxyStatus{
		{URL: a, State: StateCooling, Errors: 1, CoolingUntil: clk.Now().Add(30 * time.Second)},
		{URL: c, State: StateUp},
	}
	if d := cmp.Diff(want, p.Proxies(), cmpopts.IgnoreFields(ProxyStatus{}, "Uses")); d != "" {
		t.Errorf("after reload (-want +got):\n%s", d)
	}
	wantEv := []Event{{Proxy: c, State: StateAdded}, {Proxy: b, State: StateRemoved, Reason: "no longer listed"}}
	if d := cmp.Diff(wantEv, rec.take(), cmpopts.IgnoreFields(Event{}, "At", "Uses", "Errors")); d != "" {
		t.Errorf("reload events (-want +got):\n%s", d)
	}
	if s := acquire(t, p, "example.org"); s.Proxy() != c {
		t.Errorf("host moved to %s, want %s", s.Proxy(), c)
	}

	writeFile(t, path, a+"\nftp://u:pw7secret@127.0.0.1:4\n", 3)
	p.tick(ctx)
	if d := cmp.Diff(want, p.Proxies(), cmpopts.IgnoreFields(ProxyStatus{}, "Uses")); d != "" {
		t.Errorf("after an invalid file (-want +got):\n%s", d)
	}
	if !strings.Contains(logs.String(), "proxies.txt:2") || strings.Contains(logs.String(), "pw7secret") {
		t.Errorf("want the invalid line's position and no password in the log:\n%s", logs.String())
	}

	// Run polls the file
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	writeFile(t, path, c+"\n", 4)
	for removed := false; !removed; {
		select {
		case e := <-rec.ch:
			removed = e.Proxy == a && e.State == StateRemoved
		case <-ctx.Done():
			t.Fatal("Run never reloaded the file")
		}
	}
	cancel()
	<-done
	if d := cmp.Diff([]ProxyStatus{{URL: c, State: StateUp}}, p.Proxies(), cmpopts.IgnoreFields(ProxyStatus{}, "Uses")); d != "" {
		t.Errorf("after Run's reload (-want +got):\n%s", d)
	}
}

// TestUserAgents: each session keeps its user agent on the wire, over the
// caller's; the default applies when none is listed; a user agent file
// reload retires sessions whose agent left it.
func TestUserAgents(t *testing.T) {
	tg := newTarget(t)
	tests := []struct {
		name string
		opt  Options
		want []string
	}{
		{"list", Options{UserAgents: []string{"ua-one", "ua-two"}}, []string{"ua-one", "ua-two", "ua-one", "ua-two"}},
		{"default", Options{DefaultUserAgent: "redcrawl/1"}, []string{"redcrawl/1", "redcrawl/1", "redcrawl/1", "redcrawl/1"}},
		{"none", Options{}, []string{"caller-ua", "caller-ua", "caller-ua", "caller-ua"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.PoolSize, tc.opt.StickyRequests = 2, -1
			p := newPool(t, tc.opt)
			var got []string
			for range 4 {
				s := acquire(t, p, "127.0.0.1")
				_, body, err := get(t, s, tg.srv.URL+"/ua")
				if err != nil {
					t.Fatal(err)
				}
				if s.UserAgent() != "" && s.UserAgent() != body {
					t.Errorf("session says %q, server saw %q", s.UserAgent(), body)
				}
				got = append(got, body)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("user agents (-want +got):\n%s", d)
			}
		})
	}
	t.Run("file reload", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ua.txt")
		writeFile(t, path, "# agents\nua-old\n", 1)
		p := newPool(t, Options{UserAgentFile: path, PoolSize: 1})
		s := acquire(t, p, "h")
		writeFile(t, path, "ua-new\n", 2)
		p.tick(context.Background())
		s2 := acquire(t, p, "h")
		if got := []string{s.UserAgent(), s2.UserAgent()}; !cmp.Equal(got, []string{"ua-old", "ua-new"}) || s.ID() == s2.ID() {
			t.Errorf("user agents before and after reload %v (sessions %s, %s)", got, s.ID(), s2.ID())
		}
	})
}

// TestCookies: each session has its own jar when cookies are on, none when
// off.
func TestCookies(t *testing.T) {
	tg := newTarget(t)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("cookies ", on), func(t *testing.T) {
			p := newPool(t, Options{Cookies: on, PoolSize: 2, StickyRequests: -1})
			s1, s2 := acquire(t, p, ""), acquire(t, p, "")
			if s1 == s2 {
				t.Fatal("the same session twice")
			}
			var got []string
			for _, step := range []struct {
				s    *Session
				path string
			}{{s1, "/set?v=one"}, {s2, "/set?v=two"}, {s1, "/get"}, {s2, "/get"}} {
				_, body, err := get(t, step.s, tg.srv.URL+step.path)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, body)
			}
			want := []string{"set", "set", "one", "two"}
			if !on {
				want = []string{"set", "set", "none", "none"}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("cookies (-want +got):\n%s", d)
			}
		})
	}
}

// TestNoPasswordLeak: passwords appear in no event, log line, status,
// session or verdict, through bans, errors, retirement and reloads.
func TestNoPasswordLeak(t *testing.T) {
	tg := newTarget(t)
	hp := newFwdProxy(t, "h", "bob", "s3cret-pw")
	sp := newSocks(t, "alice", "s3cret-pw")
	var logs syncBuffer
	rec := newRecorder()
	path := filepath.Join(t.TempDir(), "proxies.txt")
	writeFile(t, path, hp.url()+"\n", 1)
	p := newPool(t, Options{
		Proxies: []string{sp.url(), "socks5://alice:s3cret-pw@127.0.0.1:1"}, ProxyFile: path, StickyRequests: -1, MaxErrors: 2,
		Logger: newLogger(&logs), OnEvent: rec.on,
	})
	var seen []string
	for range 3 { // each proxy fails or is banned in turn
		s := acquire(t, p, "")
		st, _, err := get(t, s, tg.srv.URL+"/")
		if err == nil && st == 200 {
			st = 403 // every proxy banned in turn
		}
		v := p.Report(s, Result{Status: st, Err: err})
		seen = append(seen, s.Proxy(), s.ID(), v.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(ctx, ""); err == nil {
		t.Error("Acquire succeeded with every proxy cooling down")
	}
	writeFile(t, path, "http://bob:s3cret-pw@127.0.0.1:9\n", 2)
	p.tick(context.Background())
	p.RetireProxy(sp.url())
	for _, st := range p.Proxies() {
		seen = append(seen, fmt.Sprintf("%+v", st))
	}
	for _, e := range rec.take() {
		seen = append(seen, fmt.Sprintf("%+v", e))
	}
	all := strings.Join(seen, "\n") + "\n" + logs.String()
	if strings.Contains(all, "s3cret-pw") {
		t.Errorf("a password leaked:\n%s", all)
	}
	if !strings.Contains(all, "bob:xxxxx@") || !strings.Contains(all, "alice:xxxxx@") {
		t.Errorf("want the redacted URLs:\n%s", all)
	}
}

func BenchmarkAcquireReport(b *testing.B) {
	var proxies []string
	for i := range 16 {
		proxies = append(proxies, fmt.Sprintf("http://127.0.0.1:%d", 10000+i))
	}
	p, err := New(Options{Proxies: proxies, MaxUses: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.CloseIdleConnections()
	hosts := make([]string, 256)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host%d.example", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s, err := p.Acquire(ctx, hosts[i%len(hosts)])
			if err != nil {
				b.Error(err)
				return
			}
			p.Report(s, Result{Status: 200})
			i++
		}
	})
}

// TestTransportIdleLimits checks that every route's transport keeps the
// template's idle limits, except that an http(s) proxy's may keep as many
// idle connections to the proxy as in all: plain-http requests through it
// share the proxy's connections whatever their site.
func TestTransportIdleLimits(t *testing.T) {
	type limits struct{ Total, PerHost int }
	tests := []struct {
		proxy string
		want  limits
	}{
		{"direct", limits{256, 4}},
		{"http://127.0.0.1:3128", limits{256, 256}},
		{"https://127.0.0.1:3129", limits{256, 256}},
		{"socks5://127.0.0.1:1080", limits{256, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.proxy, func(t *testing.T) {
			sp, err := parseProxy(tt.proxy)
			if err != nil {
				t.Fatal(err)
			}
			p := &Pool{opt: Options{TransportTemplate: func() *http.Transport {
				return &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 4}
			}}}
			tr, err := p.newTransport(sp)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, limits{tr.MaxIdleConns, tr.MaxIdleConnsPerHost}); d != "" {
				t.Errorf("idle limits (-want +got):\n%s", d)
			}
		})
	}
}
