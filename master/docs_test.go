package main

import (
	"io"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// referenceCommands are the commands docs/cli.md documents, in its order:
// each is run with --help. token's verbs share one usage; issue has every
// flag.
var referenceCommands = [][]string{
	{"crawl"}, {"run"}, {"seed"}, {"status"}, {"export"}, {"drop"}, {"rules", "check"}, {"migrate"},
	{"exceptions"}, {"lost"}, {"slaves"}, {"pause"}, {"resume"}, {"requeue"}, {"drain"}, {"retire-proxy"},
	{"dashboard-link"}, {"token", "issue"}, {"acl"}, {"acl", "--mysql"},
}

// TestCLIReference keeps docs/cli.md's master section what the commands'
// own -h prints; REDCRAWL_UPDATE_DOCS=1 (make docs) rewrites it.
func TestCLIReference(t *testing.T) {
	t.Setenv(cli.EnvConfig, "")
	documented := map[string]bool{}
	for _, c := range referenceCommands {
		documented[c[0]] = true
	}
	for name := range commands {
		if !documented[name] {
			t.Errorf("master %s is not in docs/cli.md: add it to referenceCommands", name)
		}
	}
	for name := range adminCommands {
		if !documented[name] {
			t.Errorf("master %s is not in docs/cli.md: add it to referenceCommands", name)
		}
	}
	var b strings.Builder
	b.WriteString("## master\n\n```text\n" + helpOf(t) + "```\n")
	for _, c := range referenceCommands {
		b.WriteString("\n### master " + strings.Join(c, " ") + "\n\n```text\n" + helpOf(t, c...) + "```\n")
	}
	doccheck.Sync(t, "docs/cli.md", "master", b.String())
}

// TestDocCommandsParse parses every master command line of README.md,
// rules/README.md and docs/ (their own shell functions, deploy's rcm,
// expanded) with the commands' real flag sets.
func TestDocCommandsParse(t *testing.T) {
	run := func(args []string, stdout, stderr io.Writer) int { return run(args, nil, stdout, stderr) }
	if n := doccheck.CheckParse(t, run, []string{"master", "redcrawl-master"}, "master crawl"); n < 40 {
		t.Errorf("found %d master command lines in the docs, want many more: is the extraction broken?", n)
	}
}
