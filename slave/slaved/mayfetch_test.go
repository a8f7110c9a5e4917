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
	cfg, l := mayFetchSetup(4 * time.Second)
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

// TestMayFetchAfterSilence: heartbeats that resume after a silence in
// which the master may have declared the slave dead (three quarters of
// master.dead_after from one beat's send to the next one's answer) leave
// the leases claimed before the answer unfetchable, though the beats are
// fresh again; a lease an extension found taken back is never fetched.
func TestMayFetchAfterSilence(t *testing.T) {
	cfg, l := mayFetchSetup(10 * time.Second)
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	type beat struct{ sent, done time.Duration } // before now
	for _, tc := range []struct {
		name  string
		asked time.Duration // before now: when the claim was sent
		beats []beat
		lost  bool // an extension found the lease taken back
		want  bool
	}{
		{"beats every 500ms", 3 * time.Second, []beat{{2500 * time.Millisecond, 2400 * time.Millisecond},
			{2 * time.Second, 1900 * time.Millisecond}, {1500 * time.Millisecond, 1400 * time.Millisecond}, {time.Second, 900 * time.Millisecond}}, false, true},
		{"a beat answered 1.6s after the one before was sent, lease claimed before", 3 * time.Second,
			[]beat{{2500 * time.Millisecond, 2400 * time.Millisecond}, {1200 * time.Millisecond, 900 * time.Millisecond},
				{400 * time.Millisecond, 300 * time.Millisecond}}, false, false},
		{"beats resumed 2.5s ago, lease claimed after", time.Second,
			[]beat{{5 * time.Second, 4900 * time.Millisecond}, {2600 * time.Millisecond, 2500 * time.Millisecond},
				{1500 * time.Millisecond, 1400 * time.Millisecond}, {500 * time.Millisecond, 400 * time.Millisecond}}, false, true},
		{"a beat sent before the silence answered after it", 3 * time.Second,
			[]beat{{2800 * time.Millisecond, 2700 * time.Millisecond}, {2300 * time.Millisecond, 600 * time.Millisecond},
				{400 * time.Millisecond, 300 * time.Millisecond}}, false, false},
		{"taken back by the master (extension)", 3 * time.Second,
			[]beat{{time.Second, 900 * time.Millisecond}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Slave{cfg: &cfg, leases: map[string]heldLease{}}
			s.track(l, ago(tc.asked), true)
			for _, b := range tc.beats {
				s.beatWent(ago(b.sent), ago(b.done))
			}
			if tc.lost {
				h := s.leases[l.URL]
				h.until = time.Time{}
				s.leases[l.URL] = h
			}
			if got := s.mayFetch(l); got != tc.want {
				t.Errorf("mayFetch = %v, want %v", got, tc.want)
			}
		})
	}
}

// mayFetchSetup is a config of leases lasting lease and master.dead_after
// 2 s, and a lease to fetch.
func mayFetchSetup(lease time.Duration) (config.Config, frontier.Lease) {
	cfg := config.Default()
	cfg.Lease.Duration = lease
	cfg.Master.DeadAfter = 2 * time.Second
	return cfg, frontier.Lease{Task: frontier.Task{URL: "http://h.test/1", Host: "h.test"}, Token: 11}
}
