package main

import (
	"bytes"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// TestCLIReference keeps docs/cli.md's slave section what slave run -h
// prints; REDCRAWL_UPDATE_DOCS=1 (make docs) rewrites it.
func TestCLIReference(t *testing.T) {
	t.Setenv(cli.EnvConfig, "")
	var out, errOut bytes.Buffer
	if code := run([]string{"run", "-h"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("slave run -h: exit %d, stderr %q", code, errOut.String())
	}
	doccheck.Sync(t, "docs/cli.md", "slave", "## slave\n\n### slave run\n\n```text\n"+out.String()+"```\n")
}

// TestDocCommandsParse parses every slave command line of README.md,
// rules/README.md and docs/ with slave run's real flag set.
func TestDocCommandsParse(t *testing.T) {
	if n := doccheck.CheckParse(t, run, []string{"slave", "redcrawl-slave"}); n < 3 {
		t.Errorf("found %d slave command lines in the docs, want more: is the extraction broken?", n)
	}
}
