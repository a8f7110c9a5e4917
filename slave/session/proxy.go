package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/proxy"

	"github.com/redcrawl/redcrawl/shared/secret"
)

// directKey is the key and display name of the direct (no proxy) route.
const directKey = "direct"

// proxySpec is one parsed proxy URL.
type proxySpec struct {
	key     string   // the full URL, credentials included: a map key, never shown
	u       *url.URL // nil for direct
	display string   // the URL with the password redacted, or "direct"
	secrets []string // spellings of the password to scrub from messages
}

// parseProxy parses one proxy URL: http://, https://, socks5:// or
// socks5h:// with an optional user:pass, or the word "direct". The error
// never contains the password.
func parseProxy(raw string) (proxySpec, error) {
	raw = strings.TrimSpace(raw)
	if raw == directKey {
		return proxySpec{key: directKey, display: directKey}, nil
	}
	shown := redactRaw(raw)
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole URL, password included: keep only
		// the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return proxySpec{}, fmt.Errorf("parse proxy %q: %w", shown, err)
	}
	scheme := strings.ToLower(u.Scheme)
	var defPort string
	switch scheme {
	case "http":
		defPort = "80"
	case "https":
		defPort = "443"
	case "socks5", "socks5h":
		defPort = "1080"
	default:
		return proxySpec{}, fmt.Errorf("parse proxy %q: unsupported scheme %q (want http, https, socks5)", shown, u.Scheme)
	}
	u.Scheme = scheme
	if u.Hostname() == "" {
		return proxySpec{}, fmt.Errorf("parse proxy %q: missing host", shown)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return proxySpec{}, fmt.Errorf("parse proxy %q: a proxy URL has no path, query or fragment", shown)
	}
	u.Path, u.RawPath, u.ForceQuery = "", "", false
	port := u.Port()
	if port == "" {
		port = defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return proxySpec{}, fmt.Errorf("parse proxy %q: invalid port %q", shown, port)
	}
	u.Host = net.JoinHostPort(u.Hostname(), port)
	sp := proxySpec{key: u.String(), u: u, display: u.Redacted()}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			sp.secrets = append(sp.secrets, pw)
			if _, enc, ok := strings.Cut(u.User.String(), ":"); ok && enc != pw {
				sp.secrets = append(sp.secrets, enc)
			}
		}
	}
	return sp, nil
}

// scrub removes the proxy's password from a message.
func (sp proxySpec) scrub(msg string) string {
	for _, s := range sp.secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// redactRaw hides the password of a URL that may not parse.
func redactRaw(s string) string { return secret.URL(s) }

// dialFunc adapts a DialContext function to proxy.Dialer and
// proxy.ContextDialer.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// defaultTransport is the base transport when Options.TransportTemplate is
// nil: http.DefaultTransport's settings without its proxy from the
// environment.
func defaultTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// newTransport builds the transport of one route: direct connections go
// through Options.DialContext, http/https proxies through http.ProxyURL with
// connections to the proxy made by Options.ProxyDialContext, SOCKS5 through
// golang.org/x/net/proxy with Options.ProxyDialContext as forward dialer.
func (p *Pool) newTransport(sp proxySpec) (*http.Transport, error) {
	var t *http.Transport
	if p.opt.TransportTemplate != nil {
		t = p.opt.TransportTemplate()
	}
	if t == nil {
		t = defaultTransport()
	}
	// Our dialers only: a template's own dial hooks would bypass the SSRF
	// guard or the proxy.
	t.Proxy, t.Dial, t.DialTLS, t.DialTLSContext, t.OnProxyConnectResponse = nil, nil, nil, nil, nil
	switch {
	case sp.u == nil:
		t.DialContext = p.opt.DialContext
	case sp.u.Scheme == "http" || sp.u.Scheme == "https":
		t.Proxy = http.ProxyURL(sp.u)
		t.DialContext = p.opt.ProxyDialContext
		// the transport keys the idle connections of plain-http requests
		// through a proxy by the proxy alone: they are all one "host", so
		// the template's per-host limit (a site's) would close most of them
		if t.MaxIdleConns > t.MaxIdleConnsPerHost {
			t.MaxIdleConnsPerHost = t.MaxIdleConns
		}
	default: // socks5, socks5h
		var auth *proxy.Auth
		if sp.u.User != nil {
			pw, _ := sp.u.User.Password()
			auth = &proxy.Auth{User: sp.u.User.Username(), Password: pw}
		}
		d, err := proxy.SOCKS5("tcp", sp.u.Host, auth, dialFunc(p.opt.ProxyDialContext))
		if err != nil {
			return nil, fmt.Errorf("socks5 dialer for %s: %w", sp.display, err)
		}
		cd, ok := d.(proxy.ContextDialer)
		if !ok {
			return nil, fmt.Errorf("socks5 dialer for %s: no DialContext", sp.display)
		}
		t.DialContext = cd.DialContext
	}
	return t, nil
}
