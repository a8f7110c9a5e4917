package render

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnapshotOfHostileURLStaysInDir: a failed render of a URL whose path
// and query are built to climb out of a directory saves its snapshot
// directly in SnapshotDir, and nothing beside it.
func TestSnapshotOfHostileURLStaysInDir(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<html><body><p>partial</p>`+strings.Repeat("<!-- padding -->", 100)+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer close(release)
	root := t.TempDir()
	dir := filepath.Join(root, "snapshots")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRenderer(t, Options{AllowPrivateNetworks: true, SnapshotDir: dir})
	for _, path := range []string{
		"/..%2F..%2F..%2Fetc%2Fpasswd",
		"/{crawl}:*?[x]/../../../tmp/x?f=../../y%00.html#../z",
	} {
		re := renderTimeout(t, r, srv.URL+path, false, func(re *Error) bool {
			b, err := os.ReadFile(re.Snapshot)
			return err == nil && strings.Contains(string(b), "<p>partial</p>")
		})
		rel, err := filepath.Rel(dir, re.Snapshot)
		if err != nil || rel != filepath.Base(re.Snapshot) || !strings.HasPrefix(rel, "render-") {
			t.Errorf("snapshot of %s is %q, not a render-* file directly in %s", path, re.Snapshot, dir)
		}
		if fi, err := os.Stat(re.Snapshot); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("snapshot of %s: %v", path, err)
		}
	}
	if es, _ := os.ReadDir(root); len(es) != 1 {
		t.Errorf("%s holds %v, want only snapshots", root, es)
	}
}
