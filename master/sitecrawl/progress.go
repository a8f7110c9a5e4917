package sitecrawl

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
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
	// hostRate is the pages a second politeness lets a host be fetched at
	// (pace.perHost; 0: no bound), which the time left is estimated from
	// until the crawl's own rate is known
	hostRate float64
	// recent are the counts of the last rateWindow, for the rate the
	// time left is estimated from
	recent []sample
}

// sample is Done at a time.
type sample struct {
	at   time.Time
	done int64
}

// rateWindow is how far back the rate of the time left looks; the rate
// is taken once its samples span minRateSpan.
const (
	rateWindow  = 30 * time.Second
	minRateSpan = 3 * time.Second
)

// line renders the counters: the share of known work that is over (done
// or failed), the rate of this run and its time, and an estimate of the
// time left (left).
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
	if left, ok := p.left(st, now); ok {
		counts += ", about " + clock(left) + " left"
	}
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

// left estimates the time the work known (queued, in flight, waiting for
// a retry) takes: at the crawl's rate since its newest count at least
// rateWindow old (or its oldest) once that spans minRateSpan, before that
// at the pace politeness allows the hosts with queued work (at least
// one). Unknown (false) without work or either rate.
func (p *progress) left(st frontier.Stats, now time.Time) (time.Duration, bool) {
	work := st.Queued + st.InFlight + st.Retry
	if work == 0 {
		return 0, false
	}
	rate := 0.0
	for len(p.recent) > 1 && now.Sub(p.recent[1].at) >= rateWindow {
		p.recent = p.recent[1:]
	}
	if len(p.recent) > 0 {
		if first := p.recent[0]; now.Sub(first.at) >= minRateSpan && st.Done > first.done {
			rate = float64(st.Done-first.done) / now.Sub(first.at).Seconds()
		}
	}
	p.recent = append(p.recent, sample{at: now, done: st.Done})
	if rate == 0 && p.hostRate > 0 {
		rate = p.hostRate * float64(max(st.Hosts, 1))
	}
	if rate <= 0 {
		return 0, false
	}
	return time.Duration(float64(work) / rate * float64(time.Second)), true
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

// pace is the politeness a host is fetched with: its rule set's where
// one sets it, else the config's.
type pace struct {
	delay  time.Duration
	jitter float64 // the mean extra wait, a share of delay
	conc   int
	rule   string // the rule set that sets it ("": the config)
}

// paceOf is the pace of the host of u.
func paceOf(cfg *config.Config, set *rules.Set, u *url.URL) pace {
	p := pace{delay: cfg.Politeness.Delay, jitter: cfg.Politeness.Jitter, conc: cfg.Politeness.HostConcurrency}
	if rs := set.Match(u); rs != nil && rs.Politeness.Overrides() {
		p.rule = rs.Name
		if d := rs.Politeness.Delay; d != nil {
			p.delay = *d
		}
		if j := rs.Politeness.Jitter; j != nil {
			p.jitter = *j
		}
		if c := rs.Politeness.Concurrency; c != nil {
			p.conc = *c
		}
	}
	switch cfg.Politeness.JitterDist {
	case "uniform":
		p.jitter /= 2 // up to jitter × delay: half of it on average
	case "none":
		p.jitter = 0
	}
	return p
}

// perHost is the pages a second the pace lets a host be fetched at (0:
// no bound: no delay), its fetches' own time aside.
func (p pace) perHost() float64 {
	if p.delay <= 0 {
		return 0
	}
	return float64(max(p.conc, 1)) / (p.delay.Seconds() * (1 + p.jitter))
}

// String says the pace at the start of a crawl, and what sets it.
func (p pace) String() string {
	delayKey, concKey := "politeness.delay", "politeness.host_concurrency"
	if p.rule != "" {
		delayKey, concKey = "the politeness delay of rule set "+p.rule, "its concurrency"
	}
	reqs := "1 request"
	if p.conc != 1 {
		reqs = fmt.Sprintf("%d requests", p.conc)
	}
	if p.delay <= 0 {
		return fmt.Sprintf("pace: at most %s at a time to a host, no delay between them (%s is 0)", reqs, delayKey)
	}
	return fmt.Sprintf("pace: at most %s at a time to a host, %s apart plus %.0f%% on average: about %.1f pages/s a host. "+
		"On a site you own, lower %s and raise %s to go faster", reqs, p.delay, p.jitter*100, p.perHost(), delayKey, concKey)
}
