package store_test

import (
	"context"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
)

// TestTokens: a token is printed once and only its hash kept; it is found
// by its hash with its slave, crawl and limits, revoked by slave, and
// listed newest first.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	crawl := testutil.CrawlName("tokens")
	tok, id, err := s.IssueToken(ctx, crawl, "pi1", store.TokenLimits{MaxInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !store.WellFormedToken(tok) || store.WellFormedToken(tok+"x") || store.WellFormedToken("Bearer "+tok) {
		t.Errorf("token %q: well-formed checks disagree", tok)
	}
	other, _, err := s.IssueToken(ctx, crawl, "pi2", store.TokenLimits{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.TokenByHash(ctx, store.TokenHash(tok))
	if err != nil || !ok || got.ID != id || got.Slave != "pi1" || got.Crawl != crawl || got.Limits.MaxInFlight != 8 || got.Revoked() {
		t.Fatalf("token by hash: %+v, %v, %v", got, ok, err)
	}
	last := "A"
	if tok[len(tok)-1] == 'A' {
		last = "B" // the altered token must differ from the issued one
	}
	if _, ok, err := s.TokenByHash(ctx, store.TokenHash(tok[:len(tok)-1]+last)); err != nil || ok {
		t.Errorf("a token never issued found: %v, %v", ok, err)
	}
	var n int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM api_tokens WHERE crawl = ? AND token_hash = ?", crawl, tok).Scan(&n); err != nil || n != 0 {
		t.Errorf("the token itself is stored: %d rows, %v", n, err)
	}
	if n, err := s.RevokeTokens(ctx, crawl, "pi1"); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if got, _, _ := s.TokenByHash(ctx, store.TokenHash(tok)); !got.Revoked() {
		t.Error("revoked token not revoked")
	}
	if got, _, _ := s.TokenByHash(ctx, store.TokenHash(other)); got.Revoked() {
		t.Error("another slave's token revoked")
	}
	list, err := s.Tokens(ctx, crawl)
	if err != nil || len(list) != 2 || list[0].Slave != "pi2" || list[1].Slave != "pi1" {
		t.Errorf("tokens: %+v, %v", list, err)
	}
}
