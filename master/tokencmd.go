package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
)

const tokenUsage = `usage: master token issue --slave ID [--out FILE] [--max-in-flight N] [--rate R] [--config config.yaml] [--crawl NAME]
       master token revoke --slave ID [--config config.yaml] [--crawl NAME]
       master token list [--json] [--config config.yaml] [--crawl NAME]

The work API's tokens (api.listen): a slave on a machine you do not trust
holds one, made for its id and the crawl, and no Redis or MySQL credential
(slave.api.urls, slave.api.token_file). issue prints the new token once
(or writes it to --out, mode 0600) and stores only its SHA-256; revoke
refuses every token of the slave within seconds (in a MySQL outage, once
MySQL answers: a token found before stays valid meanwhile); list shows
them, never the tokens themselves. --max-in-flight and --rate replace
api.max_in_flight and api.rate for the token.
`

// tokenCmd runs "master token"; it returns the exit status.
func tokenCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "issue" && args[0] != "revoke" && args[0] != "list") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, tokenUsage)
			return 0
		}
		fmt.Fprint(stderr, tokenUsage)
		return 2
	}
	verb, args := args[0], args[1:]
	fs := cli.New("master token "+verb, tokenUsage, stdout, stderr)
	cfgPath, crawl := configFlags(fs)
	slave := fs.String("slave", "", "the slave's id (issue, revoke)")
	out := fs.String("out", "", "issue: write the token to FILE (mode 0600) instead of standard output")
	inFlight := fs.Int("max-in-flight", 0, "issue: leases the slave may hold (0: api.max_in_flight)")
	rate := fs.Float64("rate", 0, "issue: requests a second (0: api.rate)")
	asJSON := fs.Bool("json", false, "list: print JSON")
	cfg, _, code := setup(fs, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "master token %s: unexpected arguments %q\n", verb, fs.Args())
		return 2
	}
	if verb != "list" {
		if err := config.CheckSlaveID(*slave); err != nil {
			fmt.Fprintf(stderr, "master token %s: --slave: %v\n", verb, err)
			return 2
		}
	}
	if *inFlight < 0 || *rate < 0 {
		fmt.Fprintln(stderr, "master token issue: --max-in-flight and --rate must be >= 0")
		return 2
	}
	st, err := masterd.OpenStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "master: %v\n", err)
		return 1
	}
	defer st.Close()
	switch verb {
	case "issue":
		tok, id, err := st.IssueToken(ctx, cfg.Crawl.Name, *slave, store.TokenLimits{MaxInFlight: *inFlight, Rate: *rate})
		if err != nil {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return 1
		}
		if *out != "" {
			if err := os.WriteFile(*out, []byte(tok+"\n"), 0o600); err != nil {
				fmt.Fprintf(stderr, "master token issue: %v (the token, id %d, is issued: revoke it, or issue another)\n", err, id)
				return 1
			}
			fmt.Fprintf(stderr, "token %d for slave %s of crawl %s written to %s\n", id, *slave, cfg.Crawl.Name, *out)
			return 0
		}
		fmt.Fprintln(stdout, tok)
		fmt.Fprintf(stderr, "token %d for slave %s of crawl %s: shown once, kept only as its SHA-256\n", id, *slave, cfg.Crawl.Name)
	case "revoke":
		n, err := st.RevokeTokens(ctx, cfg.Crawl.Name, *slave)
		if err != nil {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return 1
		}
		if n == 0 {
			fmt.Fprintf(stderr, "master token revoke: slave %s of crawl %s has no valid token\n", *slave, cfg.Crawl.Name)
			return 1
		}
		fmt.Fprintf(stdout, "%d token(s) of slave %s revoked\n", n, *slave)
	case "list":
		ts, err := st.Tokens(ctx, cfg.Crawl.Name)
		if err != nil {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return 1
		}
		if *asJSON {
			type row struct {
				ID          int64      `json:"id"`
				Slave       string     `json:"slave"`
				CreatedAt   time.Time  `json:"created_at"`
				RevokedAt   *time.Time `json:"revoked_at,omitempty"`
				MaxInFlight int        `json:"max_in_flight,omitempty"`
				Rate        float64    `json:"rate,omitempty"`
			}
			rows := []row{}
			for _, t := range ts {
				r := row{ID: t.ID, Slave: t.Slave, CreatedAt: t.CreatedAt, MaxInFlight: t.Limits.MaxInFlight, Rate: t.Limits.Rate}
				if t.Revoked() {
					r.RevokedAt = &t.RevokedAt
				}
				rows = append(rows, r)
			}
			return writeJSONOut(stdout, stderr, rows)
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tSLAVE\tCREATED\tREVOKED\tMAX IN FLIGHT\tRATE")
		for _, t := range ts {
			revoked := "-"
			if t.Revoked() {
				revoked = t.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Slave, t.CreatedAt.UTC().Format(time.RFC3339), revoked,
				orDefault(t.Limits.MaxInFlight), orDefaultF(t.Limits.Rate))
		}
		w.Flush()
	}
	return 0
}

func orDefault(v int) string {
	if v == 0 {
		return "default"
	}
	return fmt.Sprint(v)
}

func orDefaultF(v float64) string {
	if v == 0 {
		return "default"
	}
	return fmt.Sprint(v)
}

func writeJSONOut(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "master: %v\n", err)
		return 1
	}
	return 0
}
