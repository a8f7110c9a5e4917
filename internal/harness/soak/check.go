package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/store"
)

// result is what one crawl did, for the figures.
type result struct {
	pages, fetches, refetches, lost, afterLoss, gaps, gapsAfterLoss, gapsAfterFreeze int
}

// wakeWindow is how soon after a frozen slave wakes a request of its
// counts as one it was about to send when it was frozen.
const wakeWindow = 50 * time.Millisecond

// woke reports whether hit h is a request its slave sent as it woke from
// a freeze: one it had decided to send, its lease still its own, when it
// was frozen. No check of the slave's can close that window (the freeze
// may land between the check and the request); the slave's last check
// comes just before the request (slaved's mayFetch).
func (r *Round) woke(h testsite.Hit) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		if f.kind == faultSlaveFreeze && h.UserAgent == userAgent(f.target) &&
			!h.At.Before(f.to) && h.At.Sub(f.to) <= wakeWindow {
			return true
		}
	}
	return false
}

// check checks a crawl's invariants once its master exited:
//
//   - the crawl finished by itself (finished: the master exited, then the
//     slaves), and Redis says so, with nothing queued, in flight or
//     waiting for a retry;
//   - every page of the site was fetched;
//   - every page has exactly one pages row;
//   - a page was fetched again only for a lease taken back (a lost_tasks
//     row) or after Redis lost data (a fetch of it in a loss window);
//   - no two requests to one host came closer than politeness.delay, but
//     right after Redis lost data, or a request a frozen slave sent as it
//     woke (woke);
//   - no process crashed: every run the soak did not kill exited 0, at
//     the crawl's end, and no log holds a panic.
//
// Each failure names the crawl; the logs of its programs follow.
func (r *Round) check(finished bool) result {
	t := r.t
	t.Helper()
	var res result
	label := fmt.Sprintf("crawl %d (%s): ", r.n, r.topo)
	defer func() {
		if t.Failed() && !r.failedBefore {
			r.dump()
		}
	}()

	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	st, err := r.front.Stats(ctx)
	if err != nil {
		t.Errorf("%sstats: %v", label, err)
	} else if finished && (!st.Finished || st.Queued != 0 || st.InFlight != 0 || st.Retry != 0) {
		t.Errorf("%sstatus after the crawl %+v, want finished and empty", label, st)
	}

	db, err := store.Open(ctx, r.cfg.MySQL.DSN)
	if err != nil {
		t.Errorf("%s%v", label, err)
		return res
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, r.cfg.Crawl.Name, 1_000_000)
	if err != nil {
		t.Errorf("%s%v", label, err)
	}
	lostBy := map[string]int{}
	for _, l := range lost {
		lostBy[l.URL]++
	}
	rows, err := db.PageURLs(ctx, r.cfg.Crawl.Name)
	if err != nil {
		t.Errorf("%s%v", label, err)
	}
	res.lost = len(lost)

	windows := r.lossWindows()
	inLoss := func(at time.Time) bool {
		for _, w := range windows {
			if !at.Before(w[0]) && !at.After(w[1]) {
				return true
			}
		}
		return false
	}
	hits := r.site.Hits()
	count := map[string]int{}
	lossHits := map[string]int{} // a URL's fetches in a loss window
	for _, h := range hits {
		count[h.URL()]++
		if inLoss(h.At.Round(0)) {
			lossHits[h.URL()]++
		}
	}
	expected := r.site.Expected()
	res.pages = len(expected)
	var missing, extra, badRows []string
	for u, want := range expected {
		got := count[u]
		res.fetches += got
		if got < want {
			missing = append(missing, fmt.Sprintf("%s (%d of %d)", u, got, want))
		}
		if got > want {
			res.refetches += got - want
			excess := got - want - lostBy[u]
			if excess > 0 && lossHits[u] > 0 {
				n := min(excess, lossHits[u])
				res.afterLoss += n
				excess -= n
			}
			if excess > 0 {
				extra = append(extra, fmt.Sprintf("%s (%d, want %d + %d lost leases)", u, got, want, lostBy[u]))
			}
		}
		if n := rows[u]; n != 1 && !(n > 1 && n <= 1+lossHits[u]) {
			badRows = append(badRows, fmt.Sprintf("%s (%d rows, %d fetches, %d lost leases)", u, n, got, lostBy[u]))
		}
	}
	robots := 0
	for u, n := range count {
		switch {
		case strings.HasSuffix(u, "/robots.txt"):
			robots += n
		case strings.Contains(u, "/private/"):
			t.Errorf("%srobots.txt-disallowed URL fetched %d times: %s", label, n, u)
		case expected[u] == 0:
			t.Errorf("%sURL not of the site's crawl fetched %d times: %s", label, n, u)
		}
	}
	// robots.txt: once a host, shared through Redis, but the work API's
	// slave keeps it for itself (each of its runs fetches it again), and a
	// record lost with Redis's data or with a lost lease is fetched again
	hosts := len(r.site.HostURLs())
	if allowed := hosts*(1+r.api.runs()) + len(lost) + hosts*len(windows); robots > allowed {
		t.Errorf("%srobots.txt fetched %d times for %d hosts, want at most %d", label, robots, hosts, allowed)
	}
	report := func(what string, l []string) {
		if len(l) > 0 {
			sort.Strings(l)
			t.Errorf("%s%d %s, e.g. %v", label, len(l), what, l[:min(6, len(l))])
		}
	}
	report("pages never fetched", missing)
	report("pages fetched again with no lease lost and no Redis data lost", extra)
	report("pages without exactly one pages row", badRows)

	// politeness, as the site saw it (its wall clock, as Redis's)
	byHost := map[string][]testsite.Hit{}
	for _, h := range hits {
		h.At = h.At.Round(0)
		byHost[h.Host] = append(byHost[h.Host], h)
	}
	var gaps []string
	for host, hs := range byHost {
		sort.Slice(hs, func(i, j int) bool { return hs[i].At.Before(hs[j].At) })
		for i := 1; i < len(hs); i++ {
			a, b := hs[i-1], hs[i]
			gap := b.At.Sub(a.At)
			if gap >= politeDelay {
				continue
			}
			what := fmt.Sprintf("%s: %v apart at %s (%s by %s, %s by %s)", host, gap, b.At.Format("15:04:05.000"),
				a.Path, a.UserAgent, b.Path, b.UserAgent)
			if inLoss(a.At) || inLoss(b.At) {
				res.gapsAfterLoss++
				r.log.Info("politeness gap after a Redis data loss", "gap", what)
				continue
			}
			if r.woke(a) || r.woke(b) {
				res.gapsAfterFreeze++
				r.log.Info("politeness gap as a frozen slave woke", "gap", what)
				continue
			}
			res.gaps++
			gaps = append(gaps, what)
		}
	}
	report(fmt.Sprintf("requests to one host closer than the delay %v", politeDelay), gaps)

	// no crash
	for _, p := range append([]*proc{r.master, r.api}, r.slaves...) {
		for _, e := range p.ended() {
			if e.code != 0 {
				t.Errorf("%s%s exited by itself at %s: code %d (%s)", label, p.name, e.at.Format("15:04:05.000"), e.code, e.err)
			}
		}
		for _, l := range p.crashed() {
			t.Errorf("%s%s crashed: %s", label, p.name, l)
		}
	}
	if r.clock.err != nil {
		t.Errorf("%sthe clock slave: %v", label, r.clock.err)
	}
	return res
}

// dump logs the crawl's faults and the tails of its programs' logs.
func (r *Round) dump() {
	t := r.t
	r.mu.Lock()
	var b strings.Builder
	for _, f := range r.faults {
		fmt.Fprintf(&b, "  %s %s %s %s (%v)", f.from.Format("15:04:05.000"), f.kind, f.target, f.detail,
			f.to.Sub(f.from).Round(time.Millisecond))
		if !f.lossFrom.IsZero() {
			fmt.Fprintf(&b, " loss window %s-%s", f.lossFrom.Format("15:04:05.000"), f.lossTo.Format("15:04:05.000"))
		}
		b.WriteString("\n")
	}
	r.mu.Unlock()
	t.Logf("crawl %d (%s) %s, faults:\n%s", r.n, r.topo, r.cfg.Crawl.Name, b.String())
	for _, p := range append([]*proc{r.master, r.api}, r.slaves...) {
		t.Logf("--- %s's log (tail):\n%s", p.name, p.tail(3000))
	}
}
