package warc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// insideDir fails the test unless path lies in dir.
func insideDir(t *testing.T, dir, path string) {
	t.Helper()
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) ||
		strings.ContainsRune(rel, filepath.Separator) {
		t.Errorf("%q is not a file directly in %q (rel %q, %v)", path, dir, rel, err)
	}
}

// TestHostilePrefixesAndURLsStayInDir: whatever the prefix (a slave id,
// a crawl name) and the fetched URL hold, the writer creates its files,
// spools included, directly in Dir.
func TestHostilePrefixesAndURLsStayInDir(t *testing.T) {
	prefixes := []string{
		"../../escape", "/etc/passwd", "a/b/c", "..", ".", `..\..\win`, "a\x00b", "{crawl}:*?[x]", "a\nb\tc",
		"crawl:{x}:s:../../y", "bücher", "%2e%2e%2fx", strings.Repeat("p", 300), "",
	}
	urls := []string{
		"http://h.example/../../../etc/passwd", "http://a{b}.example:1/x?y=../../z#f", "http://h.example/%2e%2e%2f%2e%2e%2fx",
		"http://xn--bcher-kva.example/" + strings.Repeat("l", 2000),
	}
	for _, prefix := range prefixes {
		t.Run(strings.ToValidUTF8(prefix, "?"), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "warc")
			w, err := NewWriter(Options{Dir: dir, Prefix: prefix, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			if err != nil {
				t.Fatal(err)
			}
			for i, u := range urls {
				body := bytes.Repeat([]byte("b"), 10)
				if i == 0 {
					body = bytes.Repeat([]byte("s"), spoolMemLimit+1) // spooled to a file
				}
				if _, err := w.WriteExchange(Exchange{TargetURI: u, ResponseHeader: []byte("HTTP/1.1 200 OK\r\n\r\n"),
					Body: bytes.NewReader(body), BodySize: int64(len(body))}); err != nil {
					t.Fatalf("write %q: %v", u, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files := w.Files()
			if len(files) == 0 {
				t.Fatal("no file written")
			}
			for _, f := range files {
				insideDir(t, dir, f)
				if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s: %v", f, err)
				}
				if name := filepath.Base(f); len(name) > 255 {
					t.Errorf("file name of %d bytes", len(name))
				}
			}
			// Nothing else was made: not beside dir, not in it.
			if es, _ := os.ReadDir(root); len(es) != 1 || es[0].Name() != "warc" {
				t.Errorf("%s holds %v, want only warc", root, es)
			}
			if es, _ := os.ReadDir(dir); len(es) != len(files) {
				t.Errorf("%s holds %d entries, want the %d files", dir, len(es), len(files))
			}
		})
	}
}
