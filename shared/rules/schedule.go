package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parseDuration parses a non-negative duration string.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want a number with a unit such as 500ms, 2s or 1m", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: must be >= 0", s)
	}
	return d, nil
}

// ParseSchedule validates a cron expression (5 fields) or a descriptor
// (@daily, @every 6h) with robfig/cron's standard parser. Time zones
// (TZ=...) are refused: a schedule must mean the same on every machine
// whatever its tz database.
func ParseSchedule(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("bad schedule %q: %v", s, r)
		}
	}()
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, fmt.Errorf("bad schedule %q: time zones are not supported (schedules run in the master's local time)", s)
	}
	sched, err = cron.ParseStandard(t)
	if err != nil {
		return nil, fmt.Errorf("bad schedule %q: %w", s, err)
	}
	return sched, nil
}
