package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// benchFuncRE finds a test file's benchmarks.
var benchFuncRE = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(`)

// TestGoTestCommands: every `go test` command of the docs (sh blocks and
// inline code) names packages that exist, and its -bench pattern's first
// part matches a benchmark of one of them, so that a benchmark or a
// package that moves takes its docs with it.
func TestGoTestCommands(t *testing.T) {
	root := testutil.RepoRoot(t)
	n := 0
	for _, c := range Commands(t, "go") {
		if len(c.Args) < 2 || c.Args[1] != "test" {
			continue
		}
		n++
		var pkgs []string
		bench := ""
		for i, a := range c.Args[2:] {
			switch {
			case strings.HasPrefix(a, "./") && strings.ToUpper(a) != a: // ./PKG/: a placeholder
				pkgs = append(pkgs, strings.TrimSuffix(strings.TrimPrefix(a, "./"), "/..."))
			case a == "-bench" && i+3 < len(c.Args):
				bench = c.Args[i+3]
			}
		}
		if len(pkgs) == 0 {
			continue // the package of the directory it runs in, or a placeholder
		}
		var benches []string
		for _, p := range pkgs {
			files, _ := filepath.Glob(filepath.Join(root, p, "*_test.go"))
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: no package %s", c, p)
				continue
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range benchFuncRE.FindAllStringSubmatch(string(b), -1) {
					benches = append(benches, strings.TrimPrefix(m[1], "Benchmark"))
				}
			}
		}
		if bench == "" || bench == "." {
			continue
		}
		first, _, _ := strings.Cut(bench, "/")
		re, err := regexp.Compile(first)
		if err != nil {
			t.Errorf("%s: -bench %q: %v", c, bench, err)
			continue
		}
		found := false
		for _, b := range benches {
			found = found || re.MatchString(b)
		}
		if !found {
			t.Errorf("%s: no benchmark of %v matches -bench %q", c, pkgs, bench)
		}
	}
	if n < 10 {
		t.Errorf("%d go test commands in the docs, want 10 or more: is the parsing broken?", n)
	}
}
