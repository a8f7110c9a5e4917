package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The work API's tokens (00009_api_tokens.sql): a slave on a machine you
// do not trust holds a token the admin issued for it, and nothing else.
// Only the token's SHA-256 is stored.

// TokenPrefix starts every token, so one found in a log or a paste is
// recognised for what it is.
const TokenPrefix = "rct_"

// TokenLimits replace the work API's defaults (api.max_in_flight,
// api.rate) for one token; 0 = the default.
type TokenLimits struct {
	MaxInFlight int
	Rate        float64
}

// Token is an issued token, as the master knows it: never the token
// itself.
type Token struct {
	ID        int64
	Crawl     string
	Slave     string
	CreatedAt time.Time
	// RevokedAt is zero while the token is valid.
	RevokedAt time.Time
	Limits    TokenLimits
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// TokenHash is api_tokens.token_hash of a token.
func TokenHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// IssueToken makes a new token for a slave of a crawl and returns it: the
// only time it is seen, since only its hash is stored.
func (s *Store) IssueToken(ctx context.Context, crawl, slave string, lim TokenLimits) (string, int64, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", 0, fmt.Errorf("issue token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	h := TokenHash(token)
	res, err := s.DB.ExecContext(ctx, `INSERT INTO api_tokens (crawl, slave_id, token_hash, created_at, max_in_flight, rate)
		VALUES (?, ?, ?, ?, ?, ?)`, crawl, slave, h[:], datetime(time.Now().UnixMilli()),
		nullInt(lim.MaxInFlight), nullFloat(lim.Rate))
	if err != nil {
		return "", 0, fmt.Errorf("issue token: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", 0, fmt.Errorf("issue token: %w", err)
	}
	return token, id, nil
}

// RevokeTokens revokes every valid token of a slave of a crawl and
// returns how many.
func (s *Store) RevokeTokens(ctx context.Context, crawl, slave string) (int, error) {
	res, err := s.DB.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ?
		WHERE crawl = ? AND slave_id = ? AND revoked_at IS NULL`, datetime(time.Now().UnixMilli()), crawl, slave)
	if err != nil {
		return 0, fmt.Errorf("revoke tokens: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Tokens lists a crawl's tokens, newest first.
func (s *Store) Tokens(ctx context.Context, crawl string) ([]Token, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, crawl, slave_id, created_at, revoked_at, max_in_flight, rate
		FROM api_tokens WHERE crawl = ? ORDER BY id DESC`, crawl)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TokenByHash finds a token by its hash; ok is false when none was issued.
func (s *Store) TokenByHash(ctx context.Context, h [32]byte) (Token, bool, error) {
	row := s.DB.QueryRowContext(ctx, `SELECT id, crawl, slave_id, created_at, revoked_at, max_in_flight, rate
		FROM api_tokens WHERE token_hash = ?`, h[:])
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("look up token: %w", err)
	}
	return t, true, nil
}

// WellFormedToken reports whether s has a token's form, so that what is
// not one is refused without a look-up.
func WellFormedToken(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

func scanToken(r interface{ Scan(...any) error }) (Token, error) {
	var t Token
	var created time.Time
	var revoked sql.NullTime
	var inFlight sql.NullInt64
	var rate sql.NullFloat64
	if err := r.Scan(&t.ID, &t.Crawl, &t.Slave, &created, &revoked, &inFlight, &rate); err != nil {
		return Token{}, err
	}
	t.CreatedAt = created
	if revoked.Valid {
		t.RevokedAt = revoked.Time
	}
	t.Limits = TokenLimits{MaxInFlight: int(inFlight.Int64), Rate: rate.Float64}
	return t, nil
}

func nullInt(v int) sql.NullInt64 { return sql.NullInt64{Int64: int64(v), Valid: v > 0} }

func nullFloat(v float64) sql.NullFloat64 { return sql.NullFloat64{Float64: v, Valid: v > 0} }
