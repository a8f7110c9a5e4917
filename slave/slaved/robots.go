package slaved

import (
	"context"
	"net/url"
	"sync"
	"time"

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
	mu        sync.Mutex
	entries   map[string]robotsEntry
	maxSize   int
}

type robotsEntry struct {
	rules   *robots.Robots
	status  int
	expires time.Time
}

func newRobotsCache(store robotsStore, ttl time.Duration) *robotsCache {
	return &robotsCache{store: store, ttl: ttl, retryFail: time.Minute, entries: map[string]robotsEntry{}, maxSize: 10000}
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
func (c *robotsCache) lookup(ctx context.Context, host string) (*robots.Robots, int, bool, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[host]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.rules, e.status, true, nil
	}
	rec, found, err := c.store.GetRobots(ctx, host)
	if err != nil {
		return nil, 0, false, err
	}
	if !found || !now.Before(c.expiry(rec)) {
		return nil, 0, false, nil
	}
	e = robotsEntry{rules: rulesFor(rec), status: rec.Status, expires: c.expiry(rec)}
	c.put(host, e)
	return e.rules, e.status, true, nil
}

// fetched records a fresh fetch for every slave.
func (c *robotsCache) fetched(ctx context.Context, host string, rec frontier.RobotsRecord) (*robots.Robots, error) {
	e := robotsEntry{rules: rulesFor(rec), status: rec.Status, expires: c.expiry(rec)}
	// the shared record expires in Redis when it stops being trusted
	rec.TTL = time.Until(e.expires)
	c.put(host, e)
	return e.rules, c.store.PutRobots(ctx, host, rec)
}

func (c *robotsCache) put(host string, e robotsEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.maxSize {
		now := time.Now()
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
