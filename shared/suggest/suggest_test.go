package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"slector", "selector", 1}, {"politness", "politeness", 1},
		{"kitten", "sitting", 3}, {"", "abc", 3}, {string(make([]byte, 65)), "a", 1 << 30},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
