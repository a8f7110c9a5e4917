package slaved

import (
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestMayFetch: a slave fetches a lease only while the master cannot have
// taken it back: a quarter of the lease left, by the slave's clock since
// the claim or extension, and a heartbeat that went through less than
// three quarters of master.dead_after ago (a slave frozen or cut off that
// long is declared dead and its leases given to others).
func TestMayFetch(t *testing.T) {
	cfg := config.Default()
	cfg.Lease.Duration = 4 * time.Second
	cfg.Master.DeadAfter = 2 * time.Second
	l := frontier.Lease{Task: frontier.Task{URL: "http://h.test/1", Host: "h.test"}, Token: 11}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		tracked bool
		asked   time.Duration // before now: when the claim was sent
		beat    time.Duration // before now: when the last heartbeat that went through was sent; -1: none yet
		token   int64         // the lease's token as process has it (0: the tracked one)
		want    bool
	}{
		{"fresh", true, 100 * time.Millisecond, 300 * time.Millisecond, 0, true},
		{"no heartbeat yet", true, 100 * time.Millisecond, -1, 0, true},
		{"lease ending", true, 3100 * time.Millisecond, 100 * time.Millisecond, 0, false},
		{"heartbeats stopped for 1.5s of dead_after 2s", true, 100 * time.Millisecond, 1500 * time.Millisecond, 0, false},
		{"frozen 5s", true, 5 * time.Second, 5 * time.Second, 0, false},
		{"not tracked (FetchOne, Parse)", false, 0, 5 * time.Second, 0, true},
		{"another lease of the URL", true, 5 * time.Second, 5 * time.Second, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Slave{cfg: &cfg, leases: map[string]heldLease{}}
			if tc.tracked {
				s.track(l, now.Add(-tc.asked), true)
			}
			if tc.beat >= 0 {
				at := now.Add(-tc.beat)
				s.beatSent.Store(&at)
			}
			ask := l
			if tc.token != 0 {
				ask.Token = tc.token
			}
			if got := s.mayFetch(ask); got != tc.want {
				t.Errorf("mayFetch = %v, want %v", got, tc.want)
			}
		})
	}
}
