package workapi

import (
	"container/list"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// What one token, one address and all requests together may cost the
// master. Every map below is bounded: a cache evicts its least recently
// used entry, never starts over.
const (
	// maxCachedTokens and maxUnknownTokens bound the tokens kept found and
	// not found; maxAddrs the addresses whose look-ups are counted.
	maxCachedTokens  = 10000
	maxUnknownTokens = 10000
	maxAddrs         = 10000
	// unknownTTL is how long a token not found stays not found without a
	// look-up (a token issued meanwhile works after it).
	unknownTTL = 30 * time.Second
	// lookupRate is the MySQL look-ups a second of tokens not in the
	// cache one address may cause (bursts of lookupBurst): a flood of
	// made-up tokens costs MySQL a few queries, not one each.
	lookupRate  = 2
	lookupBurst = 20
	// maxConcurrent is the most requests of one token served at once (its
	// watches apart).
	maxConcurrent = 16
	// budgetWait is the longest a request waits for room in the decode
	// budget before it is answered 503.
	budgetWait = 2 * time.Second
	// smallBody is the largest body of the small lane of the decode
	// budget, which holds a quarter of DecodeBudget more: a heartbeat, a
	// claim, an extension and a completion of a few pages' links.
	smallBody = 256 << 10
	// minUploadRate is the slowest a body may arrive, in bytes a second,
	// after Options.UploadGrace (paced): a small body of 256 KiB in 9 s;
	// the server's ReadTimeout of a minute comes first for bodies over
	// 3.4 MiB.
	minUploadRate = 64 << 10
)

// errLookupLimited: an address over its look-ups of unknown tokens.
var errLookupLimited = errors.New("too many unknown tokens from this address")

// lru is a map of at most max entries that drops its least recently used
// entry to make room; its user locks it.
type lru[K comparable, V any] struct {
	max int
	ll  *list.List
	m   map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	k K
	v V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, ll: list.New(), m: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.m[k]; ok {
		e.Value.(*lruEntry[K, V]).v = v
		c.ll.MoveToFront(e)
		return
	}
	if c.ll.Len() >= c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*lruEntry[K, V]).k)
	}
	c.m[k] = c.ll.PushFront(&lruEntry[K, V]{k: k, v: v})
}

func (c *lru[K, V]) remove(k K) {
	if e, ok := c.m[k]; ok {
		c.ll.Remove(e)
		delete(c.m, k)
	}
}

func (c *lru[K, V]) len() int { return c.ll.Len() }

// each calls fn with every entry, most recently used first.
func (c *lru[K, V]) each(fn func(K, V)) {
	for e := c.ll.Front(); e != nil; e = e.Next() {
		en := e.Value.(*lruEntry[K, V])
		fn(en.k, en.v)
	}
}

// tokenCache keeps the tokens looked up, found (for ttl: a revoked token
// is refused after at most that) and not found (for unknownTTL), so a
// request costs no MySQL query; a token in neither is looked up only
// within its address's look-up budget.
type tokenCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	found   *lru[string, cachedToken]
	unknown *lru[string, time.Time]
	lookups *lru[string, *bucket]
}

type cachedToken struct {
	tok Token
	at  time.Time
}

func newTokenCache(ttl time.Duration) tokenCache {
	return tokenCache{ttl: ttl, found: newLRU[string, cachedToken](maxCachedTokens),
		unknown: newLRU[string, time.Time](maxUnknownTokens), lookups: newLRU[string, *bucket](maxAddrs)}
}

// tokenPrefix and tokenLen are a token's form (store.WellFormedToken):
// what has another is refused without a look-up.
const (
	tokenPrefix = "rct_"
	tokenLen    = len(tokenPrefix) + 43
)

func wellFormed(raw string) bool {
	if len(raw) != tokenLen || !strings.HasPrefix(raw, tokenPrefix) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(raw[len(tokenPrefix):])
	return err == nil
}

// get returns the token, a Token of ID 0 when there is none, or
// errLookupLimited when addr (addrKey) may not cause another look-up now.
func (c *tokenCache) get(ctx context.Context, st TokenStore, raw, addr string) (Token, error) {
	if !wellFormed(raw) {
		return Token{}, nil
	}
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.found.get(raw); ok && now.Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.tok, nil
	}
	if at, ok := c.unknown.get(raw); ok && now.Sub(at) < unknownTTL {
		c.mu.Unlock()
		return Token{}, nil
	}
	b, ok := c.lookups.get(addr)
	if !ok {
		b = &bucket{level: lookupBurst, last: now}
		c.lookups.put(addr, b)
	}
	if b.refill(now, lookupRate, lookupBurst) < 1 {
		c.mu.Unlock()
		return Token{}, errLookupLimited
	}
	c.mu.Unlock()
	tok, found, err := st.TokenByHash(ctx, raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// the store unreachable (a MySQL outage): a token found before
		// stays trusted, looked up again once a ttl, so that its slave
		// crawls on as a direct slave does; a revocation takes effect
		// once the store answers
		if e, ok := c.found.get(raw); ok {
			c.found.put(raw, cachedToken{tok: e.tok, at: now})
			return e.tok, nil
		}
		return Token{}, err
	}
	if !found {
		// only a token not found costs its address: an honest slave's
		// look-ups (its token's refresh) never run out
		b.level--
		c.unknown.put(raw, now)
		c.found.remove(raw)
		return Token{}, nil
	}
	c.unknown.remove(raw)
	c.found.put(raw, cachedToken{tok: tok, at: now})
	return tok, nil
}

// addrKey is the key an address's look-ups are counted under: its IP, an
// IPv6 address by its /64 (what one host is usually given).
func addrKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// rateLimiter is a token bucket per API token: rate units a second,
// bursts of burst (requests, or bytes of events).
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[int64]*bucket
}

type bucket struct {
	level float64
	last  time.Time
}

// refill adds what rate brought since the last refill, up to burst, and
// returns the level.
func (b *bucket) refill(now time.Time, rate, burst float64) float64 {
	b.level = min(burst, b.level+now.Sub(b.last).Seconds()*rate)
	b.last = now
	return b.level
}

// take takes cost units from the token's bucket, or returns how long
// until they are there (0: taken). A rate <= 0 is no limit.
func (l *rateLimiter) take(id int64, rate, burst, cost float64, now time.Time) time.Duration {
	if rate <= 0 {
		return 0
	}
	cost = min(cost, burst) // a cost over the burst waits for a full bucket
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		b = &bucket{level: burst, last: now}
		l.buckets[id] = b
	}
	if b.refill(now, rate, burst) >= cost {
		b.level -= cost
		return 0
	}
	return time.Duration((cost - b.level) / rate * float64(time.Second))
}

// inFlight counts each token's requests being served.
type inFlight struct {
	mu sync.Mutex
	n  map[int64]int
}

// enter counts a request of token id in, false when it has maxConcurrent
// already; leave counts it out.
func (f *inFlight) enter(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[id] >= maxConcurrent {
		return false
	}
	f.n[id]++
	return true
}

func (f *inFlight) leave(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[id]--; f.n[id] <= 0 {
		delete(f.n, id)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
