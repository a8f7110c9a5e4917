package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// adminCommands are the admin's commands: reads of the logs and live
// state, and actions. They go straight to Redis and MySQL, so they work
// whether or not a master runs.
var adminCommands = map[string]string{
	"exceptions":   "list exceptions from MySQL, newest first (filters: --since --kind --host --slave)",
	"lost":         "list lost tasks (leases taken back), newest first",
	"slaves":       "list registered slaves and their last heartbeat",
	"pause":        "stop handing out tasks (leases held finish normally)",
	"resume":       "hand out tasks again after pause",
	"requeue":      "put failed tasks back in their queues with attempts reset (--failed)",
	"drain":        "ask a slave to finish its tasks and leave (--slave ID)",
	"retire-proxy": "retire a proxy on every slave (--proxy URL as listed by the dashboard)",
}

// adminCmd runs one admin command; it returns the exit status.
func adminCmd(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	fs := cli.New("master "+cmd, "usage: master "+cmd+" [flags]\n\n"+adminCommands[cmd]+"\n", stdout, stderr)
	cfgPath, crawl := configFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	var (
		since, until             *time.Duration
		kind, host, slave, proxy *string
		limit, offset            *int
		failed                   *bool
	)
	switch cmd {
	case "exceptions":
		since = fs.Duration("since", 0, "only the last DURATION (1h, 30m); 0 = all")
		until = fs.Duration("until", 0, "only until DURATION ago; 0 = now")
		kind = fs.String("kind", "", "only this kind (timeout, dns, http_status, ...)")
		host = fs.String("host", "", "only this host")
		slave = fs.String("slave", "", "only this slave")
		limit = fs.Int("limit", 100, "at most this many rows (1 to 100000)")
		offset = fs.Int("offset", 0, "skip this many rows")
	case "lost":
		limit = fs.Int("limit", 100, "at most this many rows (1 to 100000)")
		offset = fs.Int("offset", 0, "skip this many rows")
	case "requeue":
		failed = fs.Bool("failed", false, "requeue the failed tasks (required)")
	case "drain":
		slave = fs.String("slave", "", "slave id (see master slaves)")
	case "retire-proxy":
		proxy = fs.String("proxy", "", "proxy URL, credentials redacted as listed")
	}
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "master %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "master %s: %s\n", cmd, msg)
		return 2
	}
	switch {
	case limit != nil && (*limit < 1 || *limit > 100000):
		return usageErr(fmt.Sprintf("--limit %d must be in [1, 100000]", *limit))
	case offset != nil && *offset < 0:
		return usageErr("--offset must be >= 0")
	case since != nil && (*since < 0 || *until < 0):
		return usageErr("--since and --until must be >= 0")
	case failed != nil && !*failed:
		return usageErr("say what to requeue: --failed")
	case cmd == "drain" && *slave == "":
		return usageErr("--slave is required")
	case cmd == "retire-proxy" && *proxy == "":
		return usageErr("--proxy is required")
	}
	cfg, code := loadConfig(*cfgPath, *crawl, stderr)
	if cfg == nil {
		return code
	}
	setLogger(cfg.NewLogger(stderr))
	b, closeFn, err := masterd.OpenBackend(ctx, cfg)
	if err != nil {
		return commandErr(stderr, "master "+cmd, err)
	}
	defer closeFn()
	name := cfg.Crawl.Name
	fail := func(err error) int {
		fmt.Fprintf(stderr, "master %s: %v\n", cmd, err)
		if errors.Is(err, admin.ErrBadAction) {
			return 2
		}
		return 1
	}
	printJSON := func(v any) int {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fail(err)
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	switch cmd {
	case "exceptions":
		q := admin.ExceptionQuery{Crawl: name, Kind: *kind, Host: *host, Slave: *slave, Limit: *limit, Offset: *offset}
		now := time.Now()
		if *since > 0 {
			q.Since = now.Add(-*since)
		}
		if *until > 0 {
			q.Until = now.Add(-*until)
		}
		page, err := b.Exceptions(ctx, q)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			return printJSON(page)
		}
		fmt.Fprintln(tw, "TIME\tKIND\tHOST\tSLAVE\tSTATUS\tURL\tMESSAGE")
		for _, x := range page.Items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", stamp(x.At), printable(x.Kind), dash(printable(x.Host)),
				dash(printable(x.Slave)), x.Status, clip(printable(x.URL), 80), clip(printable(oneLine(x.Message)), 100))
		}
		fmt.Fprintf(tw, "(%d of %d)\n", len(page.Items), page.Total)
	case "lost":
		ls, err := b.Lost(ctx, name, *limit, *offset)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			return printJSON(ls)
		}
		fmt.Fprintln(tw, "DETECTED\tSLAVE\tATTEMPT\tREASON\tLEASED\tURL")
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", stamp(l.DetectedAt), dash(printable(l.Slave)), l.Attempt,
				printable(l.Reason), stamp(l.LeasedAt), clip(printable(l.URL), 100))
		}
	case "slaves":
		ov, err := b.Overview(ctx)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			return printJSON(ov.Slaves)
		}
		fmt.Fprintln(tw, "SLAVE\tHOST\tSTATE\tLAST SEEN\tPAGES\tERRORS\tIN FLIGHT\tRSS MiB\tRENDER\tRULES")
		for _, s := range ov.Slaves {
			state := s.State
			switch {
			case !s.Alive:
				state = "dead"
			case s.Draining:
				state = "draining"
			case state == "":
				state = "running"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs ago\t%d\t%d\t%d\t%.1f\t%v\t%s\n", printable(s.Slave), dash(printable(s.Host)),
				printable(state), ov.Now.Sub(s.LastSeen).Seconds(), s.Pages, s.Errors, s.InFlight, float64(s.RSS)/(1<<20),
				s.Render, dash(printable(masterd.ShortVersion(s.RulesVersion))))
		}
	default:
		a := admin.Action{Crawl: name}
		switch cmd {
		case "pause":
			a.Kind = admin.ActPause
		case "resume":
			a.Kind = admin.ActResume
		case "requeue":
			a.Kind = admin.ActRequeue
		case "drain":
			a.Kind, a.Slave = admin.ActDrain, *slave
		case "retire-proxy":
			a.Kind, a.Proxy = admin.ActRetireProxy, *proxy
		}
		res, err := b.Act(ctx, a)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			return printJSON(res)
		}
		fmt.Fprintf(stdout, "crawl %s: %s\n", name, printable(res.Message))
	}
	return 0
}

func stamp(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable returns s as it is when it holds no control characters (tabs,
// newlines and terminal escapes included) and no Unicode format characters
// (bidirectional overrides, zero-width marks), else quoted with
// strconv.Quote. Values that slaves and crawled pages supply (hosts, URLs,
// slave ids, messages) go through it before they reach a terminal, so they
// cannot break a table's columns or lines or move the cursor.
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError
	}) {
		return strconv.Quote(s)
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func dashboardLinkCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master dashboard-link", `usage: master dashboard-link [--config config.yaml] [--ttl 10m]
       master dashboard-link [--config config.yaml] [--crawl NAME] --revoke-all

Print a one-time login link to the dashboard (admin.listen): opened once,
in a browser, a headless one or a script, before --ttl passes, the master
exchanges it for the login cookie. Made with admin.token; the master
refuses it once used.

--revoke-all ends every login session of the crawl's dashboard instead:
every master serving it refuses their cookies within 2s (the session
state is the crawl's, in Redis).
`, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	ttl := f.Duration("ttl", 10*time.Minute, "how long the link is valid (at most 1h)")
	revokeAll := f.Bool("revoke-all", false, "revoke every dashboard session instead of printing a link")
	cfg, _, code := setup(f, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	if f.NArg() > 0 {
		fmt.Fprintf(stderr, "master dashboard-link: unexpected arguments %q\n", f.Args())
		return 2
	}
	if *revokeAll {
		if err := masterd.RevokeDashboardSessions(ctx, cfg); err != nil {
			return commandErr(stderr, "master dashboard-link", err)
		}
		fmt.Fprintf(stdout, "every dashboard session of crawl %s is revoked: the masters refuse its cookies within %v\n",
			cfg.Crawl.Name, admin.SessionRefresh)
		return 0
	}
	link, err := masterd.DashboardLink(cfg, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "master dashboard-link: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, link)
	return 0
}
