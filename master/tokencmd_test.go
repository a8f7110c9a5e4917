package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
)

// TestTokenCommands issues, lists and revokes work API tokens with master
// token against the real MariaDB: the token is shown once and stored only
// hashed, --out writes it 0600, a revoked token is refused by the store,
// and bad usage exits 2.
func TestTokenCommands(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	crawl := testutil.CrawlName("tok")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	yaml := "mysql:\n  dsn: " + dsn + "\ncrawl:\n  name: " + crawl + "\nrules:\n  dir: \"\"\nadmin:\n  listen: \"\"\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		if len(args) >= 2 { // flags before any argument: token VERB --config FILE ...
			args = append([]string{args[0], args[1], "--config", cfgPath}, args[2:]...)
		}
		code := run(args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, stdout, stderr := cmd("token", "issue", "--slave", "pi1")
	if code != 0 {
		t.Fatalf("issue: exit %d: %s", code, stderr)
	}
	tok := strings.TrimSpace(stdout)
	if !store.WellFormedToken(tok) || !strings.Contains(stderr, "shown once") {
		t.Errorf("issue printed %q (stderr %q): want one well-formed token, shown once", stdout, stderr)
	}
	outFile := filepath.Join(dir, "pi2.token")
	if code, _, stderr := cmd("token", "issue", "--slave", "pi2", "--out", outFile, "--rate", "5", "--max-in-flight", "3"); code != 0 {
		t.Fatalf("issue --out: exit %d: %s", code, stderr)
	}
	if fi, err := os.Stat(outFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("--out file: %v, %v; want mode 0600", fi, err)
	}

	// stored hashed: the token itself is nowhere in the table
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_tokens WHERE crawl = ? AND
		(INSTR(CAST(token_hash AS CHAR CHARACTER SET latin1), ?) > 0)`, crawl, tok).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("the token is stored in clear")
	}
	if got, ok, err := db.TokenByHash(ctx, store.TokenHash(tok)); err != nil || !ok || got.Slave != "pi1" || got.Revoked() {
		t.Errorf("token by hash: %+v %v %v; want pi1's, valid", got, ok, err)
	}

	code, stdout, stderr = cmd("token", "list", "--json")
	if code != 0 {
		t.Fatalf("list --json: exit %d: %s", code, stderr)
	}
	var rows []struct {
		Slave       string  `json:"slave"`
		Revoked     *string `json:"revoked_at"`
		MaxInFlight int     `json:"max_in_flight"`
		Rate        float64 `json:"rate"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, stdout)
	}
	type row struct {
		Slave       string
		Revoked     bool
		MaxInFlight int
		Rate        float64
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Slave, r.Revoked != nil, r.MaxInFlight, r.Rate})
	}
	if d := cmp.Diff([]row{{"pi2", false, 3, 5}, {"pi1", false, 0, 0}}, got); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	if strings.Contains(stdout, tok) {
		t.Error("list shows a token")
	}

	if code, stdout, stderr := cmd("token", "revoke", "--slave", "pi1"); code != 0 || !strings.Contains(stdout, "1 token(s) of slave pi1 revoked") {
		t.Errorf("revoke: exit %d, %q %q", code, stdout, stderr)
	}
	if got, ok, err := db.TokenByHash(ctx, store.TokenHash(tok)); err != nil || !ok || !got.Revoked() {
		t.Errorf("after revoke: %+v %v %v; want revoked", got, ok, err)
	}
	code, stdout, _ = cmd("token", "list")
	if code != 0 || !strings.Contains(stdout, "MAX IN FLIGHT") || strings.Count(stdout, "\n") != 3 {
		t.Errorf("list: exit %d:\n%s", code, stdout)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"revoke again", []string{"token", "revoke", "--slave", "pi1"}, 1, "has no valid token"},
		{"no verb", []string{"token"}, 2, "usage: master token issue"},
		{"unknown verb", []string{"token", "steal"}, 2, "usage: master token issue"},
		{"no slave", []string{"token", "issue"}, 2, "--slave"},
		{"a slave id of no form", []string{"token", "issue", "--slave", "a b"}, 2, "--slave"},
		{"a negative rate", []string{"token", "issue", "--slave", "pi3", "--rate", "-1"}, 2, "must be >= 0"},
		{"extra arguments", []string{"token", "list", "x"}, 2, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cmd(tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("exit %d, want %d; output %q, want %q", code, tc.code, stdout+stderr, tc.want)
			}
		})
	}
}
