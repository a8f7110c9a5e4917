package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testcert"
)

// TestServeTLS serves over a real listener with and without TLS, logs in
// and reads, and checks that the login cookie is Secure exactly over TLS.
func TestServeTLS(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	certs := testcert.Write(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	type result struct {
		LoginStatus  int
		CookieSecure bool
		ReadStatus   int
	}
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want result
	}{
		{"https", &tls.Config{Certificates: []tls.Certificate{cert}}, result{http.StatusSeeOther, true, http.StatusOK}},
		{"http", nil, result{http.StatusSeeOther, false, http.StatusOK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, tr, stop := serveOn(t, tc.tls)
			defer stop()
			tr.TLSClientConfig = &tls.Config{RootCAs: roots}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			var got result
			resp, err := client.PostForm(base+"/login", url.Values{"token": {testToken}})
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			got.LoginStatus = resp.StatusCode
			var login *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == cookieName {
					login = c
				}
			}
			if login == nil {
				t.Fatalf("no %s cookie after login", cookieName)
			}
			got.CookieSecure = login.Secure
			req, err := http.NewRequest(http.MethodGet, base+"/api/v1/overview", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.AddCookie(login)
			if resp, err = client.Do(req); err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			got.ReadStatus = resp.StatusCode
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}

	t.Run("https refuses plain http and old TLS", func(t *testing.T) {
		base, tr, stop := serveOn(t, &tls.Config{Certificates: []tls.Certificate{cert}})
		defer stop()
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := client.Get("http://" + strings.TrimPrefix(base, "https://") + "/api/v1/overview")
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTPS") {
			t.Errorf("plain http to the TLS port: %d %q, want 400 about HTTPS", resp.StatusCode, body)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
		if resp, err := client.Get(base + "/api/v1/overview"); err == nil {
			readBody(t, resp)
			t.Error("a TLS 1.1 client was served")
		}
	})
}

// serveOn serves a test server with TLS (nil: plain HTTP) on a loopback
// port; it returns the base URL, a transport to close and a stop func
// that waits for Serve to return.
func serveOn(t *testing.T, tlsCfg *tls.Config) (string, *http.Transport, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := New(Options{Backend: newFake(), Token: testToken, TLS: tlsCfg, Sessions: testSessions(t)})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	if tlsCfg != nil {
		base = "https://" + ln.Addr().String()
	}
	tr := &http.Transport{}
	return base, tr, func() {
		tr.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context was cancelled")
		}
	}
}
