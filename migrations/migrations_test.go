package migrations

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFiles checks that the embedded migrations are numbered 1, 2, … with
// no gaps and that each has an Up and a Down section, Up first.
func TestFiles(t *testing.T) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no migrations embedded")
	}
	re := regexp.MustCompile(`^(\d{5})_[a-z0-9_]+\.sql$`)
	for i, name := range names {
		m := re.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s: want NNNNN_description.sql", name)
			continue
		}
		if v, _ := strconv.Atoi(m[1]); v != i+1 {
			t.Errorf("%s: version %d, want %d", name, v, i+1)
		}
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		up, down := strings.Index(s, "\n-- +goose Up\n"), strings.Index(s, "\n-- +goose Down\n")
		if up < 0 || down < 0 || down < up {
			t.Errorf("%s: want a -- +goose Up then a -- +goose Down section (at %d, %d)", name, up, down)
		}
		for _, want := range []string{"ENGINE=InnoDB", "utf8mb4"} {
			if strings.Contains(s[up:max(down, up)], "CREATE TABLE") && !strings.Contains(s, want) {
				t.Errorf("%s: creates tables without %s", name, want)
			}
		}
	}
}
