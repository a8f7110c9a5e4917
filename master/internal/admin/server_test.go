package admin

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(Options{Backend: newFake(), Token: testToken})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/api/v1/overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	tr.CloseIdleConnections()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}

func TestServeClosedListener(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = New(Options{Backend: newFake()}).Serve(context.Background(), ln)
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener: %v, want net.ErrClosed", err)
	}
}

func TestSecurityHeaders(t *testing.T) {
	s := newTestServer(t, newFake(), nil)
	for _, path := range []string{"/", "/login", "/api/v1/overview", "/static/dashboard.css"} {
		resp := do(s, request{path: path, headers: bearer(testToken)})
		readBody(t, resp)
		got := map[string]string{}
		for _, h := range []string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
			got[h] = resp.Header.Get(h)
		}
		want := map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s headers (-want +got):\n%s", path, d)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
}

func TestErrorLogIsRateLimited(t *testing.T) {
	var logs bytes.Buffer
	f := newFake()
	f.err = errors.New("mysql: too many connections")
	s := newTestServer(t, f, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for range 25 {
		readBody(t, do(s, request{path: "/api/v1/overview", headers: bearer(testToken)}))
	}
	if n := strings.Count(logs.String(), "too many connections"); n != 10 {
		t.Errorf("logged %d errors of 25, want 10 in a minute", n)
	}
	later := testNow.Add(time.Minute)
	s.now = func() time.Time { return later }
	logs.Reset()
	readBody(t, do(s, request{path: "/api/v1/overview", headers: bearer(testToken)}))
	if !strings.Contains(logs.String(), "suppressed=15") {
		t.Errorf("the next log should count the 15 suppressed ones:\n%s", logs.String())
	}
}
