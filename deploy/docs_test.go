package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docFiles are README.md and docs/*.md, relative to the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "rules", "README.md")}, files...)
}

var (
	mdLinkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeadingRE = regexp.MustCompile("(?m)^#{1,6} (.+)$")
	fenceRE     = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeadingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(b), ""), -1) {
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		for i := 0; out[s]; i++ { // a repeated heading gets -1, -2, …
			s = slug.String() + "-" + string(rune('1'+i))
		}
		out[s] = true
	}
	return out
}

// TestDocLinks checks that every relative link of README.md, rules/README.md
// and docs/*.md names a file that exists and, with #anchor, a heading of
// it: moving a section between them cannot leave a link pointing nowhere.
func TestDocLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range mdLinkRE.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := doc
			if path != "" {
				target = filepath.Join(filepath.Dir(doc), path)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", doc, link, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchors(t, target)[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", doc, link, target, anchor)
			}
		}
	}
}

// repoPathRE matches what docs/architecture.md names as a path of the
// repository: a top folder, then names.
var repoPathRE = regexp.MustCompile("`((?:master|slave|shared|internal|deploy|docs|rules)/[A-Za-z0-9_./-]*)`")

// TestArchitectureMap keeps docs/architecture.md true: every path it names
// exists, its package map names every Go package of the binaries and the
// harnesses, and its index of the frontier's Lua names every .lua file.
func TestArchitectureMap(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range repoPathRE.FindAllStringSubmatch(doc, -1) {
		if strings.ContainsAny(m[1], "…*") {
			continue // a pattern (migrations/NNNNN_….sql)
		}
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("docs/architecture.md names %s: %v", m[1], err)
		}
	}
	_, picture, _ := strings.Cut(doc, "```\n")
	picture, _, _ = strings.Cut(picture, "```")
	words := map[string]bool{}
	for _, w := range strings.Fields(picture) {
		words[strings.Trim(w, ",:;.")] = true
	}
	for _, top := range []string{"master", "slave", "shared", filepath.Join("internal", "harness")} {
		root := filepath.Join("..", top)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || p == root {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if strings.Contains(rel, "testdata") || strings.Contains(rel, "static") || strings.Contains(rel, "templates") ||
				strings.HasPrefix(rel, "examples") || rel == "pi" || strings.HasSuffix(rel, "test") {
				return nil // not a package of a binary: data, an example, a test suite
			}
			if gos, _ := filepath.Glob(filepath.Join(p, "*.go")); len(gos) > 0 && !words[filepath.ToSlash(rel)] {
				t.Errorf("docs/architecture.md: the package map does not name %s/%s", top, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	lua, err := filepath.Glob(filepath.Join("..", "shared", "frontier", "lua", "*.lua"))
	if err != nil || len(lua) == 0 {
		t.Fatalf("no Lua files: %v", err)
	}
	for _, f := range lua {
		_, row, ok := strings.Cut(doc, "\n| `"+filepath.Base(f)+"` |")
		if !ok {
			t.Errorf("docs/architecture.md: the index of the Lua files has no row for %s", filepath.Base(f))
			continue
		}
		row, _, _ = strings.Cut(row, "\n")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registerRE.FindAllStringSubmatch(string(src), -1) {
			if !strings.Contains(row, "`"+m[1]+"`") {
				t.Errorf("docs/architecture.md: the row of %s does not name its function %s", filepath.Base(f), m[1])
			}
		}
	}
}

// registerRE finds the functions a Lua file of the library registers.
var registerRE = regexp.MustCompile(`(?m)^register\('([a-z_]+)'`)
