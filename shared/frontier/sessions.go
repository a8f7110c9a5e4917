package frontier

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The dashboard's login sessions (master/internal/admin) are checked by
// every master that serves the dashboard and revoked by bin/master
// dashboard-link --revoke-all, another process, so their state is the
// crawl's, in Redis (Keys.Sessions, a hash):
//
//   - epoch: a random value in every session cookie's MAC. A new one
//     (RevokeAll) ends every session at once; so does losing the hash
//     (the crawl deleted, Redis emptied): the next State makes a new one.
//   - r:<id>: a session revoked by its logout, until its expiry (unix ms);
//     State drops the expired ones.
const (
	sessEpoch   = "epoch"
	sessRevoked = "r:"
)

// SessionState is the dashboard's sessions' shared state.
type SessionState struct {
	// Epoch is in every session cookie's MAC.
	Epoch string
	// Revoked are the sessions revoked before their expiry, by id.
	Revoked map[string]time.Time
}

// Sessions is the dashboard's session state of one crawl.
type Sessions struct {
	rdb redis.UniversalClient
	key string
}

// NewSessions returns the session state of crawl in rdb.
func NewSessions(rdb redis.UniversalClient, crawl string) *Sessions {
	return &Sessions{rdb: rdb, key: NewKeys(crawl).Sessions}
}

// State returns the epoch, made if there is none, and the sessions revoked
// that expire after now.
func (s *Sessions) State(ctx context.Context, now time.Time) (SessionState, error) {
	var all *redis.MapStringStringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, s.key, sessEpoch, newEpoch())
		all = p.HGetAll(ctx, s.key)
		return nil
	})
	if err != nil {
		return SessionState{}, wrap("session state", err)
	}
	st := SessionState{Revoked: map[string]time.Time{}}
	var expired []string
	for f, v := range all.Val() {
		if f == sessEpoch {
			st.Epoch = v
			continue
		}
		id, ok := strings.CutPrefix(f, sessRevoked)
		if !ok {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			st.Revoked[id] = time.Time{} // an unreadable expiry: revoked for good
			continue
		}
		if exp := time.UnixMilli(ms); now.Before(exp) {
			st.Revoked[id] = exp
		} else {
			expired = append(expired, f)
		}
	}
	if len(expired) > 0 {
		if err := s.rdb.HDel(ctx, s.key, expired...).Err(); err != nil {
			return SessionState{}, wrap("session state: drop expired", err)
		}
	}
	return st, nil
}

// Revoke revokes the session id, which expires at exp.
func (s *Sessions) Revoke(ctx context.Context, id string, exp time.Time) error {
	return wrap("revoke session", s.rdb.HSet(ctx, s.key, sessRevoked+id, exp.UnixMilli()).Err())
}

// RevokeAll revokes every session: a new epoch, and the revoked sessions
// forgotten (none of them is valid under it).
func (s *Sessions) RevokeAll(ctx context.Context) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.key)
		p.HSet(ctx, s.key, sessEpoch, newEpoch())
		return nil
	})
	return wrap("revoke all sessions", err)
}

// newEpoch returns a random epoch.
func newEpoch() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
