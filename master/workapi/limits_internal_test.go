package workapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// countingTokens is a TokenStore that counts its look-ups; the tokens of
// known are found.
type countingTokens struct {
	lookups atomic.Int64
	known   map[string]Token
	down    atomic.Bool // every look-up fails
}

func (c *countingTokens) TokenByHash(_ context.Context, raw string) (Token, bool, error) {
	c.lookups.Add(1)
	if c.down.Load() {
		return Token{}, false, errors.New("mysql: connection refused")
	}
	t, ok := c.known[raw]
	return t, ok, nil
}

func fakeToken(i int) string {
	b := make([]byte, 32)
	copy(b, fmt.Sprintf("token-%d", i))
	return "rct_" + base64.RawURLEncoding.EncodeToString(b)
}

// TestUnknownTokensCheap: a flood of made-up tokens from one address costs
// MySQL a burst of look-ups, not one each; the same unknown token is
// looked up once; another address and a cached valid token are not held
// up by it.
func TestUnknownTokensCheap(t *testing.T) {
	good := fakeToken(-1)
	st := &countingTokens{known: map[string]Token{good: {ID: 1, Crawl: "c", Slave: "pi"}}}
	c := newTokenCache(time.Minute)
	ctx := context.Background()
	if tok, err := c.get(ctx, st, good, "10.0.0.1"); err != nil || tok.ID != 1 {
		t.Fatalf("the valid token: %+v %v", tok, err)
	}
	limited := 0
	for i := range 1000 {
		_, err := c.get(ctx, st, fakeToken(i), "10.0.0.1")
		if err == errLookupLimited {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n := st.lookups.Load(); n > lookupBurst+5 {
		t.Errorf("1000 made-up tokens from one address: %d look-ups, want at most about %d", n, lookupBurst)
	}
	if limited < 900 {
		t.Errorf("%d of 1000 made-up tokens refused without a look-up, want most", limited)
	}
	if tok, err := c.get(ctx, st, good, "10.0.0.1"); err != nil || tok.ID != 1 {
		t.Errorf("the valid token from the flooding address: %+v %v", tok, err)
	}
	before := st.lookups.Load()
	if _, err := c.get(ctx, st, fakeToken(5000), "10.0.0.2"); err != nil {
		t.Errorf("another address: %v", err)
	}
	for range 10 {
		if _, err := c.get(ctx, st, fakeToken(5000), "10.0.0.2"); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.lookups.Load() - before; n != 1 {
		t.Errorf("one unknown token asked 11 times: %d look-ups, want 1", n)
	}
}

// TestTokenCacheEvicts: the token cache holds at most maxCachedTokens and
// evicts the least recently used: a token in use stays cached whatever
// else is looked up (the cache used to start over when full).
func TestTokenCacheEvicts(t *testing.T) {
	st := &countingTokens{known: map[string]Token{}}
	for i := range maxCachedTokens + 5000 {
		st.known[fakeToken(i)] = Token{ID: int64(i + 1), Crawl: "c", Slave: "s"}
	}
	c := newTokenCache(time.Hour)
	ctx := context.Background()
	hot := fakeToken(0)
	for i := range maxCachedTokens + 5000 {
		if i%100 == 0 {
			if _, err := c.get(ctx, st, hot, "h"); err != nil {
				t.Fatal(err)
			}
		}
		// each look-up from its own address: the per-address budget is
		// not what this test is about
		if _, err := c.get(ctx, st, fakeToken(i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.found.len() > maxCachedTokens || c.lookups.len() > maxAddrs {
		t.Errorf("cache of %d tokens and %d addresses, want at most %d and %d", c.found.len(), c.lookups.len(),
			maxCachedTokens, maxAddrs)
	}
	before := st.lookups.Load()
	if _, err := c.get(ctx, st, hot, "h"); err != nil {
		t.Fatal(err)
	}
	if st.lookups.Load() != before {
		t.Error("the token in use was dropped from the cache")
	}
}

// TestTokenCacheStoreDown: while the token store cannot be reached, a
// token found before stays valid, looked up again once a ttl (not for
// every request); a token never found is refused with the store's error;
// once the store answers, a revoked token is refused.
func TestTokenCacheStoreDown(t *testing.T) {
	good, other := fakeToken(1), fakeToken(2)
	st := &countingTokens{known: map[string]Token{good: {ID: 1, Crawl: "c", Slave: "pi"}, other: {ID: 2, Crawl: "c", Slave: "pj"}}}
	c := newTokenCache(50 * time.Millisecond)
	ctx := context.Background()
	if tok, err := c.get(ctx, st, good, "a"); err != nil || tok.ID != 1 {
		t.Fatalf("the token: %+v %v", tok, err)
	}
	st.down.Store(true)
	time.Sleep(60 * time.Millisecond) // past the ttl
	before := st.lookups.Load()
	for range 20 {
		if tok, err := c.get(ctx, st, good, "a"); err != nil || tok.ID != 1 {
			t.Fatalf("a token found before, the store down: %+v %v", tok, err)
		}
	}
	if n := st.lookups.Load() - before; n != 1 {
		t.Errorf("20 requests in a ttl, the store down: %d look-ups, want 1", n)
	}
	if _, err := c.get(ctx, st, other, "a"); err == nil {
		t.Error("a token never found was taken with the store down")
	}
	delete(st.known, good) // revoked meanwhile
	st.down.Store(false)
	time.Sleep(60 * time.Millisecond)
	if tok, err := c.get(ctx, st, good, "a"); err != nil || tok.ID != 0 {
		t.Errorf("a revoked token, the store back: %+v %v, want refused", tok, err)
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3:5555":               "10.1.2.3",
		"[::ffff:10.1.2.3]:80":        "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:443":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:1234": "2001:db8:1:2::/64",
		"not an address":              "not an address",
	} {
		if got := addrKey(in); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", in, got, want)
		}
	}
}
