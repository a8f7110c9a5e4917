package slaved

import (
	"testing"

	"github.com/redcrawl/redcrawl/shared/robots"
)

// TestDupCache: a body counts as seen only once its page was acked; a lost
// completion's body is parsed again when its page is fetched again (its
// links sent again), and the cache holds at most n bodies.
func TestDupCache(t *testing.T) {
	d := newDupCache(2)
	nofollow := robots.Directives{NoFollow: true}
	steps := []struct {
		name string
		do   func()
		sum  uint64
		want bool
	}{
		{"parsed, not yet acked", func() { d.parsed(1, nofollow) }, 1, false},
		{"acked", func() { d.acked(1) }, 1, true},
		{"parsed, then lost", func() { d.parsed(2, robots.Directives{}); d.lost(2) }, 2, false},
		{"a lost body acked later (fetched again)", func() { d.parsed(2, robots.Directives{}); d.acked(2) }, 2, true},
		{"a third body pushes out the first", func() { d.parsed(3, robots.Directives{}); d.acked(3) }, 1, false},
	}
	for _, st := range steps {
		st.do()
		if _, got := d.seen(st.sum); got != st.want {
			t.Errorf("%s: seen(%d) = %v, want %v", st.name, st.sum, got, st.want)
		}
	}
	d.parsed(4, nofollow)
	d.acked(4)
	if r, ok := d.seen(4); !ok || !r.NoFollow {
		t.Errorf("the directives noted when parsed: %+v %v", r, ok)
	}
}
