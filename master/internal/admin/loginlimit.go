package admin

import (
	"net/netip"
	"sync"
	"time"
)

// loginLimiter slows down guessing the token, per client: a token bucket
// of failed logins (the form's and login links') for each client address,
// burst failures, then one more every refill. A client is the connection's
// remote address, an IPv6 one by its /64 (what one host is given), so one
// client's failures never refuse another's right token. No header is
// trusted for it: behind a reverse proxy every client is the proxy.
//
// It holds at most max clients. A failure of a new client when full first
// drops the clients whose failures have all refilled; when none has, the
// one closest to it (the least left to wait): an attacker with more
// addresses than that gets back the bucket of the address that was
// nearest to having it back anyway, and nobody else is refused anything.
type loginLimiter struct {
	burst  int
	refill time.Duration
	max    int

	mu      sync.Mutex
	clients map[netip.Prefix]failures
}

// failures are a client's failures not yet refilled, as of at.
type failures struct {
	n  float64
	at time.Time
}

// clientOf is the limiter's key of a request's remote address (host:port):
// the address, an IPv6 one's /64; the zero Prefix (one client) for what
// is not an IP address and port.
func clientOf(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// left is how many of f's failures are not refilled at now.
func (l *loginLimiter) left(f failures, now time.Time) float64 {
	return max(f.n-float64(now.Sub(f.at))/float64(l.refill), 0)
}

// ready reports whether the client may try a login now: whether one more
// failure fits in its bucket.
func (l *loginLimiter) ready(c netip.Prefix, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.clients[c]
	if !ok {
		return true
	}
	n := l.left(f, now)
	if n == 0 {
		delete(l.clients, c)
	}
	return n+1 <= float64(l.burst)
}

// fail counts a failed login of the client.
func (l *loginLimiter) fail(c netip.Prefix, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients == nil {
		l.clients = map[netip.Prefix]failures{}
	}
	f, ok := l.clients[c]
	n := 0.0
	if ok {
		n = l.left(f, now)
	} else if len(l.clients) >= l.max {
		l.evict(now)
	}
	l.clients[c] = failures{n: n + 1, at: now}
}

// evict makes room for a client (see loginLimiter). It walks the table,
// some µs at the largest max: only a new client's failure when the table
// is full pays it.
func (l *loginLimiter) evict(now time.Time) {
	var (
		victim netip.Prefix
		least  float64
		freed  bool
		found  bool
	)
	for c, f := range l.clients {
		n := l.left(f, now)
		if n == 0 {
			delete(l.clients, c)
			freed = true
		} else if !found || n < least {
			victim, least, found = c, n, true
		}
	}
	if !freed && found {
		delete(l.clients, victim)
	}
}
