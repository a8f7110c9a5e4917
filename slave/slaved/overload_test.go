package slaved

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOverload: a host is held when at least two, and most, of its
// recent answers were 503; a broken URL among good answers is not.
func TestOverload(t *testing.T) {
	tests := []struct {
		name    string
		answers string // 5: a 503, o: another answer
		want    string // h: the answer holds the host, -: it does not
	}{
		{"a first 503", "5", "-"},
		{"two 503s in a row", "55", "-h"},
		{"a host answering 503 to everything", "55555555555", "-hhhhhhhhhh"},
		{"a broken URL retried among good pages", "oooooo5oo5oooo5", "---------------"},
		{"two of three", "o55", "--h"},
		{"half is not most", "o5o5", "----"},
		{"good answers again end the hold", "555oooooo5", "-hh-------"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOverload()
			got := ""
			for _, a := range tc.answers {
				if o.observe("a.test", a == '5') {
					got += "h"
				} else {
					got += "-"
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("holds for %s (-want +got):\n%s", tc.answers, d)
			}
		})
	}
	// memory is bounded
	o := newOverload()
	o.limit = 10
	for i := range 25 {
		o.observe(fmt.Sprintf("h%d.test", i), true)
	}
	if len(o.hosts) > 10 || len(o.order) != len(o.hosts) {
		t.Errorf("%d hosts kept (%d in order), limit 10", len(o.hosts), len(o.order))
	}
}
