package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
)

// deploySection is docs/deploy.md, the deploy steps.
func deploySection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var deployPathRE = regexp.MustCompile(`deploy/[A-Za-z0-9_.@/-]*[A-Za-z0-9_]`)

// TestReadmeDeployFiles checks that every deploy/ file docs/deploy.md
// names exists, so a renamed file cannot leave the steps pointing nowhere.
func TestReadmeDeployFiles(t *testing.T) {
	sec := deploySection(t)
	paths := deployPathRE.FindAllString(sec, -1)
	if len(paths) < 5 {
		t.Fatalf("docs/deploy.md names only %d deploy/ files: %q", len(paths), paths)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("docs/deploy.md names %s: %v", p, err)
		}
	}
}

// TestReadmeDeployConfig loads the config.yaml lines docs/deploy.md step 2
// sets, through shared/config, and checks that they name the directories
// the slave unit makes writable (TestSlaveWritablePaths).
func TestReadmeDeployConfig(t *testing.T) {
	sec := deploySection(t)
	_, block, ok := strings.Cut(sec, "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("docs/deploy.md has no yaml code block")
	}
	// the CA file is read when the config loads: a real one, elsewhere
	dir := t.TempDir()
	caFile, _, _, _ := testCA(t, dir)
	if !strings.Contains(block, "/etc/redcrawl/tls/ca.crt") {
		t.Errorf("docs/deploy.md's config does not name /etc/redcrawl/tls/ca.crt")
	}
	f := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(block, "/etc/redcrawl/tls/ca.crt", caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(f)
	if err != nil {
		t.Fatalf("docs/deploy.md's config.yaml:\n%s\n%v", block, err)
	}
	got := map[string]string{
		"crawl.name":          cfg.Crawl.Name,
		"rules.dir":           cfg.Rules.Dir,
		"storage.warc_dir":    cfg.Storage.WARCDir,
		"render.snapshot_dir": cfg.Render.SnapshotDir,
		"fetch.temp_dir":      cfg.Fetch.TempDir,
	}
	want := map[string]string{
		"crawl.name":          "news",
		"rules.dir":           "/etc/redcrawl/rules",
		"storage.warc_dir":    "/var/lib/redcrawl/warc",
		"render.snapshot_dir": "/var/lib/redcrawl/snapshots",
		"fetch.temp_dir":      "",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("docs/deploy.md's config (-want +got):\n%s", d)
	}
}
