package main

import (
	"bytes"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// TestCLIReference keeps docs/cli.md's slave section what slave run -h
// and slave parse -h print; REDCRAWL_UPDATE_DOCS=1 (make docs) rewrites
// it.
func TestCLIReference(t *testing.T) {
	t.Setenv(cli.EnvConfig, "")
	section := "## slave\n"
	for _, cmd := range []string{"run", "parse"} {
		var out, errOut bytes.Buffer
		if code := run([]string{cmd, "-h"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
			t.Fatalf("slave %s -h: exit %d, stderr %q", cmd, code, errOut.String())
		}
		section += "\n### slave " + cmd + "\n\n```text\n" + out.String() + "```\n"
	}
	doccheck.Sync(t, "docs/cli.md", "slave", section)
}

// TestDocCommandsParse parses every slave command line of README.md,
// rules/README.md and docs/ with the real flag sets of slave run and
// slave parse.
func TestDocCommandsParse(t *testing.T) {
	if n := doccheck.CheckParse(t, run, []string{"slave", "redcrawl-slave"}); n < 3 {
		t.Errorf("found %d slave command lines in the docs, want more: is the extraction broken?", n)
	}
}
