// Package session is the slave's pool of sessions, in the manner of
// Crawlee's SessionPool: a session binds one route (a proxy, or direct
// connections), one user agent and one cookie jar, and the pool decides
// which session carries each request from what the responses say.
//
// Where colly's proxy rotation falls short, and what this package does:
//
//   - colly rotates proxies round-robin through one http.Transport, so a
//     keep-alive connection pins every request to the proxy it was opened
//     through. Here every route has its own http.Transport: connections are
//     pooled per proxy, and picking a proxy really picks the path.
//   - colly has no ban detection. Here the caller reports each response
//     (Pool.Report); a transport error, a ban status (403, 429 by default)
//     or a body matching a pattern (a captcha page) counts as an error
//     against the session and its proxy. The proxy cools down for
//     CooldownBase, doubled for each consecutive error up to CooldownMax,
//     and is retired after MaxErrors consecutive errors; a success resets
//     the count. A banned session is retired at once (its cookies and user
//     agent are what the site flagged); a session is also retired after
//     MaxErrors consecutive errors or MaxUses uses. A retired session is
//     replaced by a fresh one (new cookie jar, next user agent).
//   - Reports about a proxy that is already cooling down change only the
//     session: requests that were in flight when the proxy was banned
//     would otherwise count the same ban many times over and retire the
//     proxy after one incident.
//   - A host keeps its session for StickyRequests requests (the site sees
//     one visitor with consistent cookies and user agent); otherwise
//     proxies are taken round-robin and, within a proxy, the least
//     recently used session.
//   - When every proxy is cooling down or retired, Acquire waits, without
//     polling, on a channel closed when a cooldown ends or the proxy list
//     changes, and the pool logs "all proxies down" once per outage.
//   - The proxy and user agent lists may live in files that are polled for
//     changes; added proxies appear, removed ones stop being handed out,
//     unchanged ones keep their state, and a file with an invalid line is
//     ignored (the previous list stays in force).
//
// Passwords in proxy URLs never leave the package: events, logs, errors,
// ProxyStatus and Session.Proxy show url.URL.Redacted().
//
// The pool's state is guarded by one mutex, held only for bookkeeping
// (never across I/O or a callback). Events are queued under the mutex and
// handed to Options.OnEvent after it is released.
package session

import (
	"net/http"
	"net/url"
)

// Session is one identity: a route, a user agent and a cookie jar. It may
// be used by several goroutines at once.
type Session struct {
	id   string
	pool *Pool
	px   *proxyEntry
	ua   string
	jar  http.CookieJar // nil when cookies are off
	rt   *roundTripper
	slot int // index in px.sessions

	// guarded by pool.mu
	uses, errors int
	retired      bool
	lastUsed     uint64
}

// ID identifies the session within its pool.
func (s *Session) ID() string { return s.id }

// Proxy is the session's proxy URL with the password redacted, or
// "direct".
func (s *Session) Proxy() string { return s.px.spec.display }

// ProxyURL is the session's proxy URL with its credentials, or nil for a
// direct session: for handing the route to another client (a headless
// browser). Never log it; Proxy is the printable form.
func (s *Session) ProxyURL() *url.URL {
	if s.px.spec.u == nil {
		return nil
	}
	u := *s.px.spec.u
	return &u
}

// Jar is the session's cookie jar, nil when cookies are off.
func (s *Session) Jar() http.CookieJar { return s.jar }

// UserAgent is the User-Agent the session sends ("" keeps the request's).
func (s *Session) UserAgent() string { return s.ua }

// RoundTripper sends requests as this session: it sets the session's
// User-Agent (overriding the request's), adds the session's cookies and
// stores the ones the response sets (when cookies are on), and sends
// through the session's proxy. It does not follow redirects (use it in an
// http.Client for that) and does not modify the caller's request.
func (s *Session) RoundTripper() http.RoundTripper { return s.rt }

type roundTripper struct{ s *Session }

// RoundTrip implements http.RoundTripper.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	s := rt.s
	if s.ua == "" && s.jar == nil {
		return s.px.transport.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if s.ua != "" {
		r.Header.Set("User-Agent", s.ua)
	}
	if s.jar != nil {
		for _, c := range s.jar.Cookies(req.URL) {
			r.AddCookie(c)
		}
	}
	res, err := s.px.transport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if s.jar != nil {
		if cs := res.Cookies(); len(cs) > 0 {
			s.jar.SetCookies(req.URL, cs)
		}
	}
	return res, nil
}
