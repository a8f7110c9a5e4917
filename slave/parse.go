package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// parseUsage is slave parse's usage, above its flags.
const parseUsage = `usage: slave parse [--config config.yaml] [--rules DIR] [--render] [--ignore-robots] [--json] URL
       slave parse [--config config.yaml] [--rules DIR] [--json] --body FILE --url URL

Fetch one URL as this slave would in a crawl (robots.txt, the rule set's
session, user agents, headers and render decision) and print what a crawl
records: the rule set that covers it, the page, its items with their
fields, every link and what becomes of it (followed, out of scope, a trap,
nofollow), its robots meta directives and canonical URL. With --body the
page is read from FILE, as URL's 200 response, and nothing is fetched.

Nothing is written: no Redis, no MySQL, no WARC file. The rules are those
of --rules, else rules.dir of the config file. Exit status: 0 the page
was fetched and parsed, whatever its HTTP status; 1 it was not (robots.txt
disallows it, the fetch failed, rendering is not possible); 2 bad usage,
config or rules.
`

// runParse is "slave parse".
func runParse(args []string, stdout, stderr io.Writer) int {
	f := cli.New("slave parse", parseUsage, stdout, stderr)
	cfgPath := f.ConfigFile("config.yaml", "config file, the defaults when there is none")
	rulesDir := f.String("rules", "", "rule directory (default rules.dir of the config file)")
	render := f.Bool("render", false, "render in headless Chromium even when no render rule covers the URL")
	ignoreRobots := f.Bool("ignore-robots", false, "fetch the URL whatever its robots.txt says")
	asJSON := f.Bool("json", false, "print JSON")
	bodyFile := f.String("body", "", "read the page from this file (a saved copy) instead of fetching it")
	pageURL := f.String("url", "", "the URL of the page (with --body; else the argument)")
	ctype := f.String("content-type", "", "the saved page's Content-Type (with --body; default from the file's extension, else sniffed)")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	rawURL := *pageURL
	switch {
	case f.NArg() > 1 || f.NArg() == 1 && rawURL != "":
		fmt.Fprintf(stderr, "slave parse: one URL, got %q\n", append(f.Args(), rawURL))
		return 2
	case f.NArg() == 1:
		rawURL = f.Arg(0)
	}
	if rawURL == "" {
		fmt.Fprint(stderr, "slave parse: no URL\n\n")
		f.PrintUsage(stderr)
		return 2
	}
	if *bodyFile == "" && (*ctype != "" || f.Given("url")) {
		fmt.Fprintln(stderr, "slave parse: --url and --content-type go with --body")
		return 2
	}
	if *bodyFile != "" && (*render || *ignoreRobots) {
		fmt.Fprintln(stderr, "slave parse: a saved page (--body) is neither rendered nor checked against robots.txt")
		return 2
	}

	cfg, fromFile, err := loadParseConfig(*cfgPath, f.Given("config") || os.Getenv(cli.EnvConfig) != "")
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return config.ExitCode(err)
	}
	opt := slaved.ParseOptions{Render: *render, IgnoreRobots: *ignoreRobots}
	dir := *rulesDir
	if dir == "" && fromFile {
		dir = cfg.Rules.Dir
	}
	var set *rules.Set
	if dir != "" {
		if set, err = rules.LoadDir(dir, rules.LoadOptions{ProxyPools: cfg.ProxyPoolNames()}); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		opt.Rules = set
	}
	if *bodyFile != "" {
		if opt.Body, err = os.ReadFile(*bodyFile); err != nil {
			fmt.Fprintf(stderr, "slave parse: %v\n", err)
			return 2
		}
		if opt.Body == nil {
			opt.Body = []byte{}
		}
		opt.ContentType = *ctype
		if opt.ContentType == "" {
			opt.ContentType = mime.TypeByExtension(filepath.Ext(*bodyFile))
		}
	}

	log := cfg.NewLogger(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := slaved.New(cfg, slaved.Options{ID: "parse", Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return 2
	}
	p, err := s.Parse(ctx, rawURL, opt)
	if err != nil {
		fmt.Fprintf(stderr, "slave %v\n", err)
		if errors.Is(err, slaved.ErrCannotRender) {
			return 1
		}
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p); err != nil {
			fmt.Fprintf(stderr, "slave parse: %v\n", err)
			return 1
		}
	} else {
		printParsed(stdout, p, set)
	}
	if p.Page == nil {
		fmt.Fprintf(stderr, "slave parse: %s: %s\n", p.URL, notFetched(p))
		return 1
	}
	return 0
}

// loadParseConfig loads the config file; without one, unless it was named
// (--config, $CRAWLER_CONFIG), the defaults and the environment: parsing
// a page needs no crawl. fromFile says a file was read. Nothing is
// written: no render snapshot.
func loadParseConfig(path string, named bool) (cfg *config.Config, fromFile bool, err error) {
	if _, statErr := os.Stat(path); errors.Is(statErr, fs.ErrNotExist) && !named {
		path = ""
	}
	if cfg, err = config.Load(path); err != nil {
		return nil, false, err
	}
	cfg.Render.SnapshotDir = ""
	if cfg.Log.Level == "info" {
		cfg.Log.Level = "warn" // a parse's info lines are noise
	}
	return cfg, path != "", nil
}

// notFetched says why a page was not fetched.
func notFetched(p *slaved.Parsed) string {
	if strings.HasPrefix(p.Robots, "disallowed") {
		return "robots.txt " + p.Robots + " (--ignore-robots fetches it anyway)"
	}
	msg := "not fetched (" + p.Outcome
	if p.Reason != "" {
		msg += ": " + p.Reason
	}
	msg += ")"
	if n := len(p.Exceptions); n > 0 {
		msg += ": " + p.Exceptions[n-1].Message
	}
	return msg
}

// linkVerdicts are the verdicts in the order they are listed, and their
// names.
var linkVerdicts = []struct{ verdict, name string }{
	{slaved.LinkFollow, "follow"},
	{slaved.LinkOutOfScope, "out of scope"},
	{slaved.LinkTrap, "trap"},
	{slaved.LinkNoFollow, "nofollow"},
	{slaved.LinkSkipped, "skipped"},
}

// printParsed prints a parse for a terminal: the page, then its items,
// links and exceptions; set (nil: none) orders each item's fields as its
// rule lists them.
func printParsed(w io.Writer, p *slaved.Parsed, set *rules.Set) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("url", p.URL)
	if p.RuleSet != "" {
		row("rule set", p.RuleSet+" ("+p.RuleFile+")")
	} else {
		row("rule set", "none")
	}
	if p.Scope != "" {
		row("scope", p.Scope+": a crawl would not take it as a seed")
	}
	row("robots.txt", p.Robots)
	row("render", p.Render)
	outcome := p.Outcome
	if p.Reason != "" {
		outcome += " (" + p.Reason + ")"
	}
	row("outcome", outcome)
	if pg := p.Page; pg != nil {
		via := ""
		if pg.Proxy != "" {
			via = ", " + pg.Proxy
		}
		rendered := ""
		if pg.Rendered {
			rendered = ", rendered"
		}
		row("status", fmt.Sprintf("%d %s, %d bytes, %d ms%s%s", pg.Status, pg.ContentType, pg.Bytes, pg.DurationMS, via, rendered))
		if pg.FinalURL != "" && pg.FinalURL != pg.URL {
			row("final url", pg.FinalURL)
		}
		if pg.Charset != "" {
			row("charset", pg.Charset)
		}
		row("robots", orNone(pg.Robots))
		row("canonical", orNone(pg.Canonical))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nitems: %d\n", len(p.Items))
	for _, it := range p.Items {
		fmt.Fprintf(tw, "  %s/%s\t%s\n", it.Rule, it.Item, it.URL)
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(it.Fields, &fields); err != nil {
			fmt.Fprintf(tw, "    %s\n", it.Fields)
			continue
		}
		for _, name := range fieldOrder(set, it, fields) {
			fmt.Fprintf(tw, "    %s\t%s\n", name, jsonText(fields[name]))
		}
	}
	tw.Flush()

	counts := map[string]int{}
	for _, l := range p.Links {
		counts[l.Verdict]++
	}
	var parts []string
	for _, v := range linkVerdicts {
		if n := counts[v.verdict]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v.name))
		}
	}
	fmt.Fprintf(w, "\nlinks: %d", len(p.Links))
	if len(parts) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	for _, v := range linkVerdicts {
		for _, l := range p.Links {
			if l.Verdict != v.verdict {
				continue
			}
			note := l.Reason
			if l.Render {
				note = strings.TrimPrefix(note+", rendered", ", ")
			}
			if note == "" {
				fmt.Fprintf(tw, "  %s\t%s\n", v.name, l.URL)
			} else {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.name, l.URL, note)
			}
		}
	}
	tw.Flush()

	if len(p.Exceptions) > 0 {
		fmt.Fprintf(w, "\nexceptions: %d\n", len(p.Exceptions))
		for _, x := range p.Exceptions {
			fmt.Fprintf(tw, "  %s\t%s\n", x.Kind, x.Message)
		}
		tw.Flush()
	}
}

// fieldOrder lists an item's field names as its item rule lists them,
// then the others (an OnItem hook's) by name.
func fieldOrder(set *rules.Set, it slaved.ParsedItem, fields map[string]json.RawMessage) []string {
	var names []string
	seen := map[string]bool{}
	if set != nil {
		for _, rs := range set.Sets {
			if rs.Name != it.Rule {
				continue
			}
			for _, ir := range rs.Items {
				if ir.Name != it.Item {
					continue
				}
				for _, fd := range ir.Fields {
					if _, ok := fields[fd.Name]; ok && !seen[fd.Name] {
						names, seen[fd.Name] = append(names, fd.Name), true
					}
				}
			}
		}
	}
	var rest []string
	for name := range fields {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// jsonText is a field's JSON value for a terminal: compact, with & < >
// as they are (the stored JSON escapes them).
func jsonText(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
