package admin

import (
	"context"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// SessionStore holds the state of the dashboard's login sessions that
// every master serving the dashboard shares with bin/master
// dashboard-link --revoke-all: the epoch in every cookie's MAC and the
// sessions revoked by a logout (frontier.Sessions, in Redis).
type SessionStore interface {
	// State returns the epoch, made if there is none, and the sessions
	// revoked that expire after now.
	State(ctx context.Context, now time.Time) (frontier.SessionState, error)
	// Revoke revokes the session id, which expires at exp.
	Revoke(ctx context.Context, id string, exp time.Time) error
}

// SessionRefresh is how old a master's copy of the shared session state
// may get: a cookie check reads it again after that, so a revocation
// elsewhere (another master's logout, dashboard-link --revoke-all) takes
// effect on every master within SessionRefresh.
const SessionRefresh = 2 * time.Second

// When the store cannot be read the last state read serves for
// sessionStale, then cookies are refused (the Bearer token still works)
// until the store answers again.
const (
	sessionStale   = 30 * time.Second
	sessionTimeout = 2 * time.Second // of one read or write of the store
)

// sessionCache is a master's copy of the shared session state.
type sessionCache struct {
	store SessionStore

	mu     sync.Mutex
	st     frontier.SessionState
	loaded time.Time // when st was read; zero = never
	tried  time.Time // the last read, failed or not
	err    error     // of the last read
	// local are the sessions this master revoked, kept beside st until
	// they expire: a logout whose write to the store failed still holds
	// here
	local map[string]time.Time
}

// state returns the epoch and whether session id is revoked. It reads the
// store when the copy is older than SessionRefresh, or always with fresh
// (a login: its cookie must carry the current epoch).
func (c *sessionCache) state(ctx context.Context, now time.Time, id string, fresh bool) (epoch string, revoked bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fresh || (now.Sub(c.loaded) >= SessionRefresh && now.Sub(c.tried) >= SessionRefresh) {
		c.tried = now
		ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
		st, err := c.store.State(ctx, now)
		cancel()
		c.err = err
		if err == nil {
			c.st, c.loaded = st, now
			for l, exp := range c.local {
				if !now.Before(exp) {
					delete(c.local, l)
				}
			}
		}
	}
	if c.loaded.IsZero() || (c.err != nil && (fresh || now.Sub(c.loaded) >= sessionStale)) {
		return "", false, c.err
	}
	_, r1 := c.st.Revoked[id]
	_, r2 := c.local[id]
	return c.st.Epoch, r1 || r2, nil
}

// revoke revokes session id (expiring at exp) here at once, and in the
// store for every master.
func (c *sessionCache) revoke(ctx context.Context, id string, exp time.Time) error {
	c.mu.Lock()
	if c.local == nil {
		c.local = map[string]time.Time{}
	}
	c.local[id] = exp
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	return c.store.Revoke(ctx, id, exp)
}
