package slaved

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestRobotsCause: a robots.txt record of status 0 carries the cause of the
// failed fetch, so the slave that finds it cached reports the real cause.
func TestRobotsCause(t *testing.T) {
	refused := fmt.Errorf("dial tcp 10.0.0.1:80: %w", errors.New("connect: connection refused"))
	fe := classify(refused)
	stored := robotsCause{kind: fe.Kind, msg: fe.Err.Error()}.body()
	tests := []struct {
		name string
		rec  frontier.RobotsRecord
		want robotsCause
		msg  string // robotsError's message, cached
	}{
		{"fetch error", frontier.RobotsRecord{Status: 0, Body: stored},
			robotsCause{kind: events.KindConnect, msg: refused.Error()},
			"robots.txt of h: dial tcp 10.0.0.1:80: connect: connection refused (cached)"},
		{"an older slave's record", frontier.RobotsRecord{Status: 0},
			robotsCause{kind: events.KindOther, msg: "unreachable"}, "robots.txt of h: unreachable (cached)"},
		{"a forged kind", frontier.RobotsRecord{Status: 0, Body: []byte("robots_denied\tx")},
			robotsCause{kind: events.KindOther, msg: "unreachable"}, "robots.txt of h: unreachable (cached)"},
		{"a 503", frontier.RobotsRecord{Status: 503, Body: []byte("down")}, robotsCause{}, "robots.txt of h: status 503 (cached)"},
	}
	for _, tc := range tests {
		got := causeOf(tc.rec)
		if got != tc.want {
			t.Errorf("%s: causeOf = %+v, want %+v", tc.name, got, tc.want)
		}
		e := &robotsError{host: "h", status: tc.rec.Status, cause: got, cached: true}
		if e.Error() != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.name, e.Error(), tc.msg)
		}
	}
	long := robotsCause{kind: events.KindOther, msg: strings.Repeat("x", 2000)}.body()
	if len(long) != maxCauseBytes {
		t.Errorf("a long cause stored in %d bytes, want %d", len(long), maxCauseBytes)
	}
}
