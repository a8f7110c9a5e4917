package workapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

func servedLease(i int) frontier.Lease {
	l := frontier.Lease{Token: int64(100 + i), Shard: i % 2, LeasedAt: time.UnixMilli(int64(1000 + i))}
	l.URL, l.Host, l.Depth = fmt.Sprintf("http://h.test/%d", i), "h.test", i%3
	return l
}

// ref is a lease as a slave's completion names it.
func ref(l frontier.Lease) frontier.Lease {
	r := frontier.Lease{Token: l.Token, Shard: l.Shard}
	r.URL = l.URL
	return r
}

func TestServedLeases(t *testing.T) {
	type step struct {
		op    string // add, take, forget
		slave string
		lease int
		found bool // take: whether it is found
	}
	cases := []struct {
		name            string
		perSlave, total int
		steps           []step
		want            int // leases remembered at the end
	}{
		{"a lease is taken once", 10, 100, []step{
			{"add", "a", 1, false}, {"take", "a", 1, true}, {"take", "a", 1, false},
		}, 0},
		{"only its own slave's", 10, 100, []step{
			{"add", "a", 1, false}, {"take", "b", 1, false}, {"take", "a", 1, true},
		}, 0},
		{"another token or shard is another lease", 10, 100, []step{
			{"add", "a", 1, false}, {"take", "a", -1, false}, {"take", "a", 1, true},
		}, 0},
		{"the oldest goes first", 2, 100, []step{
			{"add", "a", 1, false}, {"add", "a", 2, false}, {"add", "a", 3, false},
			{"take", "a", 1, false}, {"take", "a", 2, true}, {"take", "a", 3, true},
		}, 0},
		{"at most total in all", 10, 2, []step{
			{"add", "a", 1, false}, {"add", "b", 2, false}, {"add", "c", 3, false},
			{"take", "c", 3, false}, {"take", "a", 1, true},
		}, 1},
		{"a slave that left is forgotten", 10, 100, []step{
			{"add", "a", 1, false}, {"add", "a", 2, false}, {"add", "b", 3, false}, {"forget", "a", 0, false},
			{"take", "a", 1, false}, {"add", "a", 4, false},
		}, 2},
		{"served twice is remembered once", 10, 100, []step{
			{"add", "a", 1, false}, {"add", "a", 1, false}, {"take", "a", 1, true}, {"take", "a", 1, false},
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServedLeases(c.perSlave, c.total)
			for i, st := range c.steps {
				l := servedLease(st.lease)
				if st.lease < 0 { // lease 1 with another token and shard
					l = servedLease(1)
					l.Token, l.Shard = 999, 1
				}
				switch st.op {
				case "add":
					s.add(st.slave, []frontier.Lease{l})
				case "take":
					got, ok := s.take(st.slave, ref(l))
					if ok != st.found {
						t.Fatalf("step %d: take(%s, %d) found %v, want %v", i, st.slave, st.lease, ok, st.found)
					}
					if ok {
						if d := cmp.Diff(l, got); d != "" {
							t.Errorf("step %d: lease (-served +taken):\n%s", i, d)
						}
					}
				case "forget":
					s.forget(st.slave)
				}
			}
			if s.n != c.want {
				t.Errorf("remembered %d, want %d", s.n, c.want)
			}
		})
	}
}

// TestServedLeasesBounded serves a slave many leases it never completes
// (lost ones): what is remembered stays within the bound.
func TestServedLeasesBounded(t *testing.T) {
	s := newServedLeases(100, 1000)
	for i := range 10000 {
		s.add("a", []frontier.Lease{servedLease(i)})
		if i%3 == 0 {
			s.take("a", ref(servedLease(i)))
		}
	}
	if ls := s.slaves["a"]; s.n > 100 || ls.len() != s.n {
		t.Fatalf("remembered %d (the slave's %d), want at most 100", s.n, ls.len())
	}
	if _, ok := s.take("a", ref(servedLease(9998))); !ok {
		t.Error("the newest lease was forgotten")
	}
}
