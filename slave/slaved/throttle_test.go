package slaved

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestThrottle(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		latency time.Duration
		status  int
	}
	tests := []struct {
		name   string
		target float64
		steps  []step
		want   []time.Duration
	}{
		{"slow host backs off towards latency", 1, []step{{800 * ms, 200}, {800 * ms, 200}, {800 * ms, 200}},
			[]time.Duration{800 * ms, 800 * ms, 800 * ms}},
		{"fast host comes down halfway each time, not below min", 1,
			[]step{{2000 * ms, 200}, {10 * ms, 200}, {10 * ms, 200}, {10 * ms, 200}},
			[]time.Duration{2000 * ms, 1005 * ms, 507500 * time.Microsecond, 258750 * time.Microsecond}},
		{"capped at max", 1, []step{{time.Minute, 200}}, []time.Duration{5 * time.Second}},
		{"higher target concurrency shortens the delay", 4, []step{{800 * ms, 200}}, []time.Duration{200 * ms}},
		{"errors never lower the delay", 1, []step{{1000 * ms, 200}, {10 * ms, 500}, {10 * ms, 404}, {3000 * ms, 503}},
			[]time.Duration{1000 * ms, 1000 * ms, 1000 * ms, 3000 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := newThrottle(100*ms, 5*time.Second, tt.target)
			var got []time.Duration
			for _, s := range tt.steps {
				got = append(got, th.observe("h", s.latency, s.status))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}

func TestThrottleForgetsOldestHosts(t *testing.T) {
	th := newThrottle(time.Millisecond, time.Second, 1)
	th.limit = 3
	for _, h := range []string{"a", "b", "c", "d"} {
		th.observe(h, 500*time.Millisecond, 200)
	}
	if _, ok := th.delay["a"]; ok || len(th.delay) != 3 {
		t.Errorf("hosts kept = %v, want b c d", th.order)
	}
}
