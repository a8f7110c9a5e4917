package content

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpillStaysInTempDir: a spilled body's file is created directly in
// BodyOptions.TempDir whatever the body holds (crawled data never names
// the file) and is removed by Close.
func TestSpillStaysInTempDir(t *testing.T) {
	for _, body := range []string{
		"../../../etc/passwd\x00" + strings.Repeat("x", 4096),
		"{crawl}:*?[\n\t" + strings.Repeat("/..", 2000),
	} {
		root := t.TempDir()
		dir := filepath.Join(root, "bodies")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := ReadBody(strings.NewReader(body), BodyOptions{MemLimit: 1024, TempDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if b.InMemory() {
			t.Fatal("the body was not spilled")
		}
		rel, err := filepath.Rel(dir, b.file.Name())
		if err != nil || rel != filepath.Base(b.file.Name()) || !strings.HasPrefix(rel, "redcrawl-body-") {
			t.Errorf("spill file %q is not directly in %q (%q, %v)", b.file.Name(), dir, rel, err)
		}
		if es, _ := os.ReadDir(root); len(es) != 1 {
			t.Errorf("%s holds %v, want only bodies", root, es)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if es, _ := os.ReadDir(dir); len(es) != 0 {
			t.Errorf("%s holds %v after Close", dir, es)
		}
	}
}
