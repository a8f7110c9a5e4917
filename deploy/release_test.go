package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeGo stands in for the go command in "make release": building six
// cross-compiled binaries takes minutes on a small machine, and this test
// is about what the Makefile asks for and what release.sh packs. Each
// "binary" records the environment and arguments it was built with.
const fakeGo = `#!/bin/sh
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out=$a; fi
  prev=$a
done
[ "$1" = build ] && [ -n "$out" ] || { echo "fake go: unexpected $*" >&2; exit 1; }
printf 'CGO_ENABLED=%s GOOS=%s GOARCH=%s GOARM=%s %s\n' "$CGO_ENABLED" "$GOOS" "$GOARCH" "$GOARM" "$*" >"$out"
`

const releaseEpoch = 1700000000

func runCmd(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMakeRelease runs "make release" with a fake go command and checks the
// binaries it asked for, the tarballs release.sh wrote from them and
// SHA256SUMS (with sha256sum -c, as docs/deploy.md does on the hosts).
func TestMakeRelease(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found in PATH: the release test needs it")
	}
	for _, tool := range []string{"tar", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found in PATH: release.sh needs it", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	goBin := filepath.Join(tmp, "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	// MAKEFLAGS and MAKELEVEL of a "make test" above this test are not ours
	env := []string{"SOURCE_DATE_EPOCH=" + strconv.Itoa(releaseEpoch), "MAKEFLAGS=", "MAKELEVEL=", "MFLAGS="}
	if out, err := runCmd(t, root, env, "make", "--no-print-directory", "release", "VERSION=test", "BIN="+bin, "GO="+goBin); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	rel := filepath.Join(bin, "release")

	// what the Makefile built
	targets := []struct{ name, goarch, goarm string }{
		{"amd64", "amd64", ""}, {"arm64", "arm64", ""}, {"armv7", "arm", "7"},
	}
	for _, tg := range targets {
		for _, cmd := range []string{"master", "slave"} {
			b, err := os.ReadFile(filepath.Join(rel, cmd+"-linux-"+tg.name))
			if err != nil {
				t.Fatal(err)
			}
			want := "CGO_ENABLED=0 GOOS=linux GOARCH=" + tg.goarch + " GOARM=" + tg.goarm +
				" build -trimpath -ldflags -s -w -o " + filepath.Join(rel, cmd+"-linux-"+tg.name) + " ./" + cmd + "\n"
			if d := cmp.Diff(want, string(b)); d != "" {
				t.Errorf("%s-linux-%s built with (-want +got):\n%s", cmd, tg.name, d)
			}
		}
	}

	// SHA256SUMS covers the six binaries and the three tarballs, and checks
	sums, err := os.ReadFile(filepath.Join(rel, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || len(f[0]) != 64 {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", line)
		}
		listed = append(listed, f[1])
	}
	slices.Sort(listed)
	wantListed := []string{
		"master-linux-amd64", "master-linux-arm64", "master-linux-armv7",
		"redcrawl-test-linux-amd64.tar.gz", "redcrawl-test-linux-arm64.tar.gz", "redcrawl-test-linux-armv7.tar.gz",
		"slave-linux-amd64", "slave-linux-arm64", "slave-linux-armv7",
	}
	if d := cmp.Diff(wantListed, listed); d != "" {
		t.Errorf("SHA256SUMS lists (-want +got):\n%s", d)
	}
	if out, err := runCmd(t, rel, nil, "sha256sum", "-c", "SHA256SUMS"); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}

	// each tarball: one top directory with the binaries and the files a
	// host needs, owned by 0:0, dated SOURCE_DATE_EPOCH
	wantFiles := expectedTarFiles(t, root)
	for _, tg := range targets {
		name := "redcrawl-test-linux-" + tg.name
		entries := readTarball(t, filepath.Join(rel, name+".tar.gz"))
		var got []string
		for _, e := range entries {
			got = append(got, strings.TrimPrefix(e.hdr.Name, name+"/"))
			if e.hdr.Uid != 0 || e.hdr.Gid != 0 || e.hdr.Uname != "" || e.hdr.Gname != "" {
				t.Errorf("%s: %s owned by %d(%q):%d(%q), want 0:0 numeric", name, e.hdr.Name, e.hdr.Uid, e.hdr.Uname, e.hdr.Gid, e.hdr.Gname)
			}
			if e.hdr.ModTime.Unix() != releaseEpoch {
				t.Errorf("%s: %s mtime %v, want SOURCE_DATE_EPOCH", name, e.hdr.Name, e.hdr.ModTime)
			}
			if !strings.HasPrefix(e.hdr.Name, name+"/") {
				t.Errorf("%s: %s is outside the top directory", name, e.hdr.Name)
			}
		}
		slices.Sort(got)
		if d := cmp.Diff(wantFiles, got); d != "" {
			t.Errorf("%s entries (-want +got):\n%s", name, d)
		}
		for _, e := range entries {
			rest := strings.TrimPrefix(e.hdr.Name, name+"/")
			var want []byte
			mode := int64(0o644)
			switch {
			case e.hdr.Typeflag == tar.TypeDir:
				mode = 0o755
			case rest == "redcrawl-master" || rest == "redcrawl-slave":
				mode = 0o755
				want, err = os.ReadFile(filepath.Join(rel, strings.TrimPrefix(rest, "redcrawl-")+"-linux-"+tg.name))
			case rest == "config.example.yaml":
				want, err = os.ReadFile(filepath.Join(root, "config.yaml"))
			default:
				want, err = os.ReadFile(filepath.Join(root, rest))
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.hdr.Mode != mode {
				t.Errorf("%s: %s mode %o, want %o", name, e.hdr.Name, e.hdr.Mode, mode)
			}
			if e.hdr.Typeflag != tar.TypeDir && !bytes.Equal(e.body, want) {
				t.Errorf("%s: %s differs from its source", name, e.hdr.Name)
			}
		}
	}

	// reproducible: packing the same binaries again gives the same bytes
	again := filepath.Join(tmp, "again")
	if err := os.Mkdir(again, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		for _, cmd := range []string{"master", "slave"} {
			b, err := os.ReadFile(filepath.Join(rel, cmd+"-linux-"+tg.name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(again, cmd+"-linux-"+tg.name), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := runCmd(t, root, env, "bash", "deploy/release.sh", "test", again); err != nil {
		t.Fatalf("release.sh again: %v\n%s", err, out)
	}
	for _, tg := range targets {
		f := "redcrawl-test-linux-" + tg.name + ".tar.gz"
		a, errA := os.ReadFile(filepath.Join(rel, f))
		b, errB := os.ReadFile(filepath.Join(again, f))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two runs on the same input differ", f)
		}
	}
}

// TestReleaseScriptRefuses checks release.sh's usage errors: a version that
// would make a bad file name, and binaries that were not built.
func TestReleaseScriptRefuses(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
	}{
		{"slash in version", []string{"a/b", empty}, 2, `bad version "a/b"`},
		{"empty version", []string{"", empty}, 2, `bad version ""`},
		{"no binaries", []string{"test", empty}, 1, "master-linux-amd64 is missing"},
		{"no arguments", nil, 2, "usage: deploy/release.sh VERSION DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCmd(t, root, nil, "bash", append([]string{"deploy/release.sh"}, tt.args...)...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tt.wantCode {
				t.Fatalf("release.sh %q: %v, want exit status %d\n%s", tt.args, err, tt.wantCode, out)
			}
			if !strings.Contains(out, tt.wantMsg) {
				t.Errorf("release.sh %q said %q, want it to contain %q", tt.args, out, tt.wantMsg)
			}
		})
	}
	if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
		t.Errorf("release.sh left files after refusing: %v %v", ents, err)
	}
}

type tarEntry struct {
	hdr  *tar.Header
	body []byte
}

func readTarball(t *testing.T, path string) []tarEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("%s: gzip header carries a time %v or a name %q", path, zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var entries []tarEntry
	for range 1000 {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, hdr.Name, err)
		}
		entries = append(entries, tarEntry{hdr, body})
	}
	t.Fatalf("%s: more than 1000 entries", path)
	return nil
}

// expectedTarFiles is the sorted list of paths (directories with a
// trailing slash, the top directory as "") a release tarball holds, taken
// from the repository.
func expectedTarFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"", "README.md", "config.example.yaml", "docs/",
		"redcrawl-master", "redcrawl-slave", "rules/", "rules/README.md", "deploy/"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
		files = append(files, "LICENSE")
	}
	for _, sub := range []string{"systemd", "redis", "mariadb"} {
		err := filepath.WalkDir(filepath.Join(root, "deploy", sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if d.IsDir() {
				rel += "/"
			}
			files = append(files, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	return files
}
