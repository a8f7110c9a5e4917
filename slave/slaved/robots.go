package slaved

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/robots"
)

// robotsStore is where robots.txt records are shared between slaves.
type robotsStore interface {
	GetRobots(ctx context.Context, host string) (frontier.RobotsRecord, bool, error)
	PutRobots(ctx context.Context, host string, r frontier.RobotsRecord) error
}

// robotsCache keeps parsed robots.txt per host in memory in front of the
// shared store. A host's robots.txt is fetched by the slave that first
// claims the host (it holds the host's politeness slot), stored in Redis for
// every other slave, and trusted for robots_ttl; an unreachable or 5xx
// robots.txt disallows for now and is tried again after a minute
// (RFC 9309 §2.3.1.4).
type robotsCache struct {
	store     robotsStore
	ttl       time.Duration
	retryFail time.Duration
	now       func() time.Time // the slave's clock (Slave.now)
	mu        sync.Mutex
	entries   map[string]robotsEntry
	maxSize   int
}

type robotsEntry struct {
	rules   *robots.Robots
	status  int
	expires time.Time
	// cause is why robots.txt could not be had (status 0): the exception
	// kind of the fetch error and its message, shared with every slave
	// in the record's body (causeOf)
	cause robotsCause
}

// robotsCause is why a robots.txt fetch failed: the exception kind of its
// error (classify) and its message. A record of status 0 carries it as its
// body, "kind \t message", so a slave that finds the record cached reports
// the cause the fetching slave met.
type robotsCause struct{ kind, msg string }

// maxCauseBytes bounds the cause stored in a robots record.
const maxCauseBytes = 512

func (c robotsCause) body() []byte {
	b := c.kind + "\t" + c.msg
	if len(b) > maxCauseBytes {
		b = b[:maxCauseBytes]
	}
	return []byte(b)
}

// causeOf reads the cause of a record of status 0 (kind other when it has
// none: a record of an older slave).
func causeOf(rec frontier.RobotsRecord) robotsCause {
	if rec.Status != 0 {
		return robotsCause{}
	}
	kind, msg, ok := strings.Cut(string(rec.Body), "\t")
	if !ok || !validKind(kind) {
		return robotsCause{kind: events.KindOther, msg: "unreachable"}
	}
	return robotsCause{kind: kind, msg: strings.ToValidUTF8(msg, "?")}
}

// validKind is a kind a robots cause may carry: one classify gives.
func validKind(k string) bool {
	switch k {
	case events.KindBlocked, events.KindDNS, events.KindTLS, events.KindTimeout, events.KindConnect, events.KindOther:
		return true
	}
	return false
}

// robotsError is a robots.txt that could not be had: disallowed for now.
type robotsError struct {
	host   string
	status int         // 0: not fetched (cause says why), else a 5xx
	cause  robotsCause // status 0
	cached bool        // found so in the shared record, not fetched now
	err    error       // the fetch error, when this slave met it
}

func (e *robotsError) Error() string {
	from := ""
	if e.cached {
		from = " (cached)"
	}
	if e.status != 0 {
		return fmt.Sprintf("robots.txt of %s: status %d%s", e.host, e.status, from)
	}
	return fmt.Sprintf("robots.txt of %s: %s%s", e.host, e.cause.msg, from)
}

func (e *robotsError) Unwrap() error { return e.err }

func newRobotsCache(store robotsStore, ttl time.Duration, now func() time.Time) *robotsCache {
	return &robotsCache{store: store, ttl: ttl, now: now, retryFail: time.Minute, entries: map[string]robotsEntry{}, maxSize: 10000}
}

// rulesFor interprets a robots.txt fetch result per RFC 9309 §2.3.1:
// 2xx parsed, 4xx allow all, 5xx or unreachable disallow all.
func rulesFor(rec frontier.RobotsRecord) *robots.Robots {
	switch {
	case rec.Status >= 200 && rec.Status < 300:
		return robots.Parse(rec.Body)
	case rec.Status >= 400 && rec.Status < 500:
		return robots.AllowAll()
	default:
		return robots.DisallowAll()
	}
}

func (c *robotsCache) expiry(rec frontier.RobotsRecord) time.Time {
	if rec.Status == 0 || rec.Status >= 500 {
		return rec.FetchedAt.Add(c.retryFail)
	}
	return rec.FetchedAt.Add(c.ttl)
}

// lookup returns the rules for a host from memory or the shared store;
// ok is false when they must be fetched.
func (c *robotsCache) lookup(ctx context.Context, host string) (robotsEntry, bool, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[host]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e, true, nil
	}
	rec, found, err := c.store.GetRobots(ctx, host)
	if err != nil {
		return robotsEntry{}, false, err
	}
	if !found || !now.Before(c.expiry(rec)) {
		return robotsEntry{}, false, nil
	}
	e = robotsEntry{rules: rulesFor(rec), status: rec.Status, expires: c.expiry(rec), cause: causeOf(rec)}
	c.put(host, e)
	return e, true, nil
}

// fetched records a fresh fetch for every slave.
func (c *robotsCache) fetched(ctx context.Context, host string, rec frontier.RobotsRecord) (*robots.Robots, error) {
	e := robotsEntry{rules: rulesFor(rec), status: rec.Status, expires: c.expiry(rec), cause: causeOf(rec)}
	// the shared record expires in Redis when it stops being trusted
	rec.TTL = e.expires.Sub(c.now())
	c.put(host, e)
	return e.rules, c.store.PutRobots(ctx, host, rec)
}

func (c *robotsCache) put(host string, e robotsEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.maxSize {
		now := c.now()
		for h, old := range c.entries {
			if now.After(old.expires) || len(c.entries) >= c.maxSize {
				delete(c.entries, h)
			}
		}
	}
	c.entries[host] = e
}

// robotsURL is the robots.txt URL of a page's origin.
func robotsURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + "/robots.txt"
}
