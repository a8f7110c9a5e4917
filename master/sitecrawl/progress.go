package sitecrawl

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// barWidth is the progress bar's width in cells.
const barWidth = 24

// progress shows a crawl's progress: on a terminal one line redrawn in
// place (a bar), elsewhere a plain line each time.
type progress struct {
	w        io.Writer
	terminal bool
	start    time.Time
	done0    int64 // Done at the start: the rate is this run's
	drawn    bool  // a terminal line is on screen
}

// line renders the counters: the share of known work that is over (done
// or failed), the rate of this run and its time.
func (p *progress) line(st frontier.Stats, now time.Time) string {
	over := st.Done + st.Failed
	known := over + st.Queued + st.InFlight + st.Retry
	elapsed := now.Sub(p.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(st.Done-p.done0) / s
	}
	counts := fmt.Sprintf("done %d, queued %d, in flight %d, retry %d, failed %d, %.1f pages/s, %s",
		st.Done, st.Queued, st.InFlight, st.Retry, st.Failed, rate, clock(elapsed))
	if !p.terminal {
		return "progress: " + counts
	}
	frac := 0.0
	if known > 0 {
		frac = float64(over) / float64(known)
	}
	full := int(frac * barWidth)
	return fmt.Sprintf("[%s%s] %3.0f%% %s", strings.Repeat("#", full), strings.Repeat("-", barWidth-full), frac*100, counts)
}

// show prints the progress of st.
func (p *progress) show(st frontier.Stats) {
	l := p.line(st, time.Now())
	if !p.terminal {
		fmt.Fprintln(p.w, l)
		return
	}
	fmt.Fprint(p.w, "\r\033[K"+l)
	p.drawn = true
}

// end ends a terminal's progress line.
func (p *progress) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// clock renders a duration as m:ss (h:mm:ss past an hour).
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
