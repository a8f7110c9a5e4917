package workapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// tokenCache keeps tokens looked up (found or not) for ttl, so a request
// costs no MySQL query and a flood of made-up tokens costs one a token
// and a few seconds; it holds at most maxCachedTokens and starts over when
// full.
type tokenCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedToken
}

type cachedToken struct {
	tok Token // ID 0: no such token
	at  time.Time
}

const maxCachedTokens = 10000

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

// get returns the token, a Token of ID 0 when there is none.
func (c *tokenCache) get(ctx context.Context, st TokenStore, raw string) (Token, error) {
	if !wellFormed(raw) {
		return Token{}, nil
	}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[raw]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.tok, nil
	}
	tok, found, err := st.TokenByHash(ctx, raw)
	if err != nil {
		return Token{}, err
	}
	if !found {
		tok = Token{}
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedTokens {
		c.m = map[string]cachedToken{}
	}
	c.m[raw] = cachedToken{tok: tok, at: now}
	c.mu.Unlock()
	return tok, nil
}

// rateLimiter is a token bucket per API token: rate requests a second,
// bursts of max(2 × rate, 10).
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[int64]*bucket
}

type bucket struct {
	level float64
	last  time.Time
}

// take takes one request from the token's bucket, or returns how long
// until one is there (0: taken). A rate <= 0 is no limit.
func (l *rateLimiter) take(id int64, rate float64, now time.Time) time.Duration {
	if rate <= 0 {
		return 0
	}
	burst := max(2*rate, 10)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		b = &bucket{level: burst, last: now}
		l.buckets[id] = b
	}
	b.level = min(burst, b.level+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.level >= 1 {
		b.level--
		return 0
	}
	return time.Duration((1 - b.level) / rate * float64(time.Second))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
