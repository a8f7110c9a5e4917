package secret

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://u:pw@h:6379/0", "redis://u:xxxxx@h:6379/0"},
		{"redis://:pw@h:6379", "redis://:xxxxx@h:6379"},
		{"redis://u@h:6379", "redis://u@h:6379"},
		{"http://h:3128", "http://h:3128"},
		{"http://u:p%40ss@h:3128", "http://u:xxxxx@h:3128"},
		{"redis://u:secret@[::1", "redis://u:xxxxx@[::1"}, // does not parse
		{"socks5://u:a@b@[bad", "socks5://u:xxxxx@[bad"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"u:pw@tcp(h:3306)/db?parseTime=true", "u:xxxxx@tcp(h:3306)/db?parseTime=true"},
		{"u@tcp(h:3306)/db", "u@tcp(h:3306)/db"},
		{"u:p@ss@tcp(h:3306)/db", "u:xxxxx@tcp(h:3306)/db"},
		{"u:pw@tcp(h:3306", "xxxxx@tcp(h:3306"}, // does not parse
	}
	for _, tc := range tests {
		if got := DSN(tc.in); got != tc.want {
			t.Errorf("DSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScrub(t *testing.T) {
	got := Scrub("dial redis://u:p%40ss%2Fw@h failed; pw p@ss/w; p%40ss%2Fw", "p@ss/w", "")
	want := "dial redis://u:xxxxx@h failed; pw xxxxx; xxxxx"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Scrub (-want +got):\n%s", diff)
	}
	if got := URLPassword("redis://u:p%40ss@h"); got != "p@ss" {
		t.Errorf("URLPassword = %q", got)
	}
}
