package slaved

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// errShutdown marks a fetch cut short by a hard stop: its lease is given
// back untried.
var errShutdown = errors.New("slave stopping")

// errGiveBack marks a request not made: its lease may have been taken
// back by the master (mayFetch).
var errGiveBack = errors.New("lease given back unfetched: the master may have taken it back")

// process fetches one leased task and says what became of it.
func (s *Slave) process(ctx context.Context, l frontier.Lease) frontier.Completion {
	c := frontier.Completion{Lease: l, Outcome: frontier.Done}
	if !s.mayFetch(l) {
		return s.giveBack(ctx, c)
	}
	u, err := url.Parse(l.URL)
	if err != nil {
		s.exception(&c, events.KindParse, 0, fmt.Sprintf("parse url: %v", err))
		c.Outcome, c.Reason = frontier.Fail, "bad url"
		return c
	}
	rs := s.ruleFor(u)
	s.seedSitemap(&c, u)
	if s.cfg.Politeness.ObeyRobots && s.robots != nil { // FetchOne has no robots cache, Parse may not
		rules, err := s.robotsFor(ctx, u, &c, rs)
		if errors.Is(err, errShutdown) {
			c.Outcome = frontier.Release
			return c
		}
		if errors.Is(err, errGiveBack) {
			return s.giveBack(ctx, frontier.Completion{Lease: l})
		}
		var re *robotsError
		if err != nil {
			s.noteRobots("unavailable: " + err.Error())
		}
		if errors.As(err, &re) && re.status == 0 && re.cause.kind == events.KindBlocked {
			// a non-public address: no retry mends it (the fetch's own
			// refusal, without robots, fails the same way)
			s.exception(&c, events.KindBlocked, 0, "robots.txt unavailable: "+err.Error())
			c.Outcome, c.Reason = frontier.Fail, events.KindBlocked
			return c
		}
		if err != nil {
			// robots.txt unreachable: disallowed for now, retried later;
			// the host is overloaded or down: it waits too, for every slave
			s.exception(&c, events.KindRobotsDenied, 0, "robots.txt unavailable: "+err.Error())
			c.Outcome, c.Reason = frontier.Retry, "robots.txt unavailable"
			c.RetryIn = s.backoff(l.Attempt, 0)
			c.Backoff = c.RetryIn
			return c
		}
		if !rules.Allowed(s.cfg.Fetch.UserAgent, u) {
			s.noteRobots("disallowed for " + s.token)
			s.exception(&c, events.KindRobotsDenied, 0, "disallowed by robots.txt")
			return c
		}
		s.noteRobots("allowed")
	}
	rr := s.renderRule(l, u, rs)
	r, ended := s.requestHooks(ctx, &c, u, rr != nil)
	if ended {
		return c
	}
	res, ended, err := s.fetchHooked(ctx, &c, r, func(ctx context.Context, hdr http.Header) (*Response, error) {
		return s.fetchOrRender(ctx, l, u, rs, rr, hdr)
	})
	if errors.Is(err, errGiveBack) {
		return s.giveBack(ctx, frontier.Completion{Lease: l})
	}
	if ended {
		return c
	}
	if err != nil {
		if ctx.Err() != nil {
			c.Outcome = frontier.Release
			return c
		}
		var fe *FetchError
		if !errors.As(err, &fe) {
			fe = classify(err)
		}
		s.exceptionSnapshot(&c, fe.Kind, 0, fe.Err.Error(), fe.Snapshot)
		if fe.Retryable {
			c.Outcome, c.Reason, c.RetryIn = frontier.Retry, fe.Kind, s.backoff(l.Attempt, 0)
		} else {
			c.Outcome, c.Reason = frontier.Fail, fe.Kind
		}
		return c
	}
	defer res.Close()
	s.bytes.Add(res.Body.Size())
	s.met.Bytes(res.Body.Size())
	if res.Rendered {
		s.met.Rendered()
	}
	p, ended := s.responseHooks(ctx, &c, u, r, res)
	if ended {
		return c
	}
	c = s.handle(ctx, c, u, res, p)
	s.finishResponse(ctx, &c, p)
	return c
}

// giveBack gives back, unfetched, a lease the master may have taken back
// (mayFetch): a completion that releases it if it still holds it, and is
// refused if not.
func (s *Slave) giveBack(ctx context.Context, c frontier.Completion) frontier.Completion {
	s.rl.Log(ctx, levelWarn, "give-back", "leases given back unfetched: no heartbeat went through lately or the lease is ending, so the master may have taken them back",
		"url", c.Lease.URL)
	c.Outcome = frontier.Release
	return c
}

// renderRule is the render rule a task is rendered by, nil when it is
// fetched: a render task whose rule still says so (a rule edited since the
// URL was queued falls back to a static fetch), on a slave that can render.
func (s *Slave) renderRule(l frontier.Lease, u *url.URL, rs *rules.RuleSet) *rules.Render {
	if !l.Render || !s.canRender.Load() {
		return nil
	}
	if rs != nil {
		if rr := rs.RenderFor(u); rr != nil {
			return rr
		}
	}
	if tr := s.trace.Load(); tr != nil && tr.render {
		return &DefaultRender // Parse asked for it
	}
	return nil
}

// fetchOrRender fetches a task (with the OnRequest hooks' headers hdr),
// rendering it in headless Chromium by rr when rr is not nil (renderRule),
// with its resources granted by the governor.
func (s *Slave) fetchOrRender(ctx context.Context, l frontier.Lease, u *url.URL, rs *rules.RuleSet, rr *rules.Render, hdr http.Header) (*Response, error) {
	release, err := s.acquire(ctx, rr != nil)
	if err != nil {
		return nil, err
	}
	defer release()
	// the last moment before the request: robots.txt, the hooks and the
	// governor may have taken long
	if !s.mayFetch(l) {
		return nil, errGiveBack
	}
	if rr != nil {
		return s.renderFetch(ctx, l, rs, rr)
	}
	fr := fetchRequest(l.URL, rs)
	// a revisit's conditional headers over the rule set's, a hook's over
	// them all
	for _, h := range []http.Header{conditionalHeaders(l.Revisit), hdr} {
		for k, v := range h {
			if fr.Header == nil {
				fr.Header = http.Header{}
			}
			fr.Header[k] = v
		}
	}
	return s.fetcher.Fetch(ctx, fr)
}

// fetchRequest is the request of a URL of a rule set (nil: none): its
// session options and fetch settings (user agents, headers, timeout).
// Its Header is a copy, the caller's to add to.
func fetchRequest(rawURL string, rs *rules.RuleSet) FetchRequest {
	fr := FetchRequest{URL: rawURL}
	if rs == nil {
		return fr
	}
	fr.Session, fr.UserAgents, fr.Timeout = rs.Session, rs.Fetch.UserAgents, rs.Fetch.Timeout
	if len(rs.Fetch.Headers) > 0 {
		fr.Header = rs.Fetch.Headers.Clone()
	}
	return fr
}

// retried reports whether a page of a rule set (nil: none) that answered
// status st is fetched again later: the rule set's fetch.retry_statuses,
// else 408, 429 and 5xx.
func retried(rs *rules.RuleSet, st int) bool {
	if rs != nil && rs.Fetch.RetryStatuses != nil {
		return slices.Contains(rs.Fetch.RetryStatuses, st)
	}
	return st == http.StatusRequestTimeout || st == http.StatusTooManyRequests || st >= 500
}

// handle turns a response into a completion: it stores the response in
// WARC, classifies the status, runs the content handler of 2xx bodies and
// scopes and trap-checks the links found: the handler's and the canonical
// URL unless the OnResponse hooks' page p (nil without hooks) asked
// SkipLinks, a redirect's target and a sitemap's URLs always. It notes on
// p that the page says nofollow, for the hooks' links.
func (s *Slave) handle(ctx context.Context, c frontier.Completion, u *url.URL, res *Response, p *Page) frontier.Completion {
	handlerLinks := p == nil || !p.skipLinks
	l := c.Lease
	s.noteFetch(res.Duration)
	page := &events.Page{Crawl: s.cfg.Crawl.Name, URL: l.URL, FinalURL: l.URL, Status: res.Status,
		ContentType: res.Header.Get("Content-Type"), Bytes: res.Body.Size(), Depth: l.Depth,
		FetchedAt: s.now().UnixMilli(), Slave: s.id, DurationMS: res.Duration.Milliseconds(), Attempt: l.Attempt,
		Proxy: res.Proxy, Rendered: res.Rendered, LastMod: l.LastMod}
	rs := s.ruleFor(u)
	if rs != nil {
		page.RuleSet = rs.Name
	}
	if res.FinalURL != "" && res.FinalURL != l.URL {
		if fu, err := url.Parse(res.FinalURL); err == nil {
			page.FinalURL = res.FinalURL
			u = fu // links resolve against where the browser ended
		}
	}
	if res.Body.Size() > 0 {
		page.Checksum = events.FormatChecksum(res.Body.Checksum())
		sha := res.Body.SHA1()
		page.ContentHash = hex.EncodeToString(sha[:])
	}
	page.ETag, page.LastModified = res.Header.Get("ETag"), res.Header.Get("Last-Modified")
	if s.revisit(&c, u, res, page) {
		return c // unchanged: recorded as it was (recrawl.go)
	}
	st := res.Status
	// X-Robots-Tag applies to any response; a 2xx page's robots meta tags
	// are read by its handler, so its WARC record waits for them
	robotsHdr := s.headerRobots(res.Header)
	page.Robots = robotsHdr.String()
	if st >= 300 || res.Truncated() {
		page.WARC = s.storeWARCUnless(&c, u, res, robotsHdr)
	}
	if s.throttle != nil && (st < 300 || st >= 400) {
		d := s.throttle.observe(l.Host, res.Duration, st)
		c.HostDelay = max(c.HostDelay, d)
	}
	overloaded := s.overload.observe(l.Host, st == http.StatusServiceUnavailable)
	switch {
	case retried(rs, st):
		wait := s.backoff(l.Attempt, retryAfter(res.Header, s.cfg.Lease.RetryMax))
		s.exception(&c, events.KindHTTPStatus, st, "HTTP "+strconv.Itoa(st))
		c.Outcome, c.Reason, c.RetryIn = frontier.Retry, "http "+strconv.Itoa(st), wait
		if st == http.StatusTooManyRequests || overloaded {
			// the host is overloaded: the whole host waits, for every
			// slave; a single URL's 503 delays only its retry (overload.go)
			c.Backoff = wait
		}
		return c
	case st >= 300 && st < 400:
		loc := res.Header.Get("Location")
		var problem string
		var target *url.URL
		switch {
		case loc == "":
			problem = "redirect without Location"
		case l.Hops+1 > s.cfg.Crawl.MaxRedirects:
			problem = fmt.Sprintf("redirect chain longer than %d hops", s.cfg.Crawl.MaxRedirects)
		default:
			var err error
			if target, err = s.canon.Resolve(u, loc); err != nil {
				problem = "redirect target: " + err.Error()
			} else if target.String() == l.URL {
				problem, target = "redirect loop: the target is the page itself", nil
			}
		}
		if target != nil {
			page.FinalURL = target.String()
			pl, v, ok := s.planLink(target, l.Depth, l.Hops+1)
			if ok {
				carrySitemap(&pl.task, l)
				s.addTask(&c, pl)
				v.Reason = "redirect"
			} else {
				v.Reason = "redirect target " + v.Reason
			}
			s.noteLinks(v)
		}
		s.addEvent(&c, page)
		if problem != "" {
			s.exception(&c, events.KindRedirect, st, problem)
		}
		return c
	case st >= 400:
		s.addEvent(&c, page)
		s.exception(&c, events.KindHTTPStatus, st, "HTTP "+strconv.Itoa(st))
		return c
	}
	// 2xx
	if res.Truncated() {
		s.exception(&c, events.KindTooLarge, st, fmt.Sprintf("body larger than %d bytes", s.cfg.Fetch.MaxBodyBytes))
		c.Outcome, c.Reason = frontier.Fail, events.KindTooLarge
		return c
	}
	doc := &Doc{URL: u, Lease: l, Header: res.Header, Body: res.Body,
		MediaType: mediaType(page.ContentType, res.Body.Prefix(512))}
	if s.sitemapDoc(&c, page, doc) {
		s.addEvent(&c, page)
		return c
	}
	h := s.handlers.Lookup(doc.MediaType)
	page.Handler = h.Name()
	dup := false
	var meta robots.Directives // the robots meta tags' directives
	if s.cfg.Crawl.ContentDedup && res.Body.Size() > 0 {
		c.ContentHash = res.Body.Checksum()
		// a body of a page this slave fetched and the frontier acked: the
		// frontier records the duplicate when it acks; its links are not
		// extracted again, and its robots meta tags are those noted when
		// it was (dupcache.go)
		meta, dup = s.dups.seen(c.ContentHash)
	}
	if !dup {
		if err := h.Handle(ctx, doc); err != nil {
			kind := events.KindParse
			if ce := (*CharsetError)(nil); errors.As(err, &ce) {
				kind = events.KindCharset
			}
			s.exception(&c, kind, st, h.Name()+": "+err.Error())
		}
		meta = doc.Robots
		if rs != nil && !res.Rendered && h.Name() == "html" {
			if rd := s.maybeDynamic(ctx, &c, rs, doc); rd != nil {
				rd.Robots = rd.Robots.Merge(meta) // the static page's tags hold too
				if rd.Canonical == "" {
					rd.Canonical = doc.Canonical
				}
				doc = rd
				meta = rd.Robots
				page.Rendered = true
			}
		}
		if c.ContentHash != 0 {
			s.dups.parsed(c.ContentHash, meta)
		}
	}
	directives := robotsHdr
	if s.cfg.Crawl.ObeyRobotsMeta {
		directives = directives.Merge(meta)
	}
	page.Robots = directives.String()
	page.Canonical = s.canonicalOf(doc)
	// noindex: the page is recorded, not stored (no WARC record, no items)
	page.WARC = s.storeWARCUnless(&c, u, res, directives)
	if !dup && rs != nil && !directives.NoIndex {
		s.extractItems(ctx, &c, rs, doc, page.FetchedAt)
	}
	page.Charset = doc.Charset
	nofollow := doc.NoFollow || directives.NoFollow
	if p != nil {
		p.nofollow = nofollow
	}
	switch {
	case !nofollow && handlerLinks:
		s.addLinks(&c, doc.Links, l.Depth+1, "")
	case nofollow:
		s.noteDropped(s.nofollowLinks(doc), LinkNoFollow, "the page says nofollow")
	default:
		s.noteDropped(doc.Links, LinkSkipped, "an OnResponse hook called SkipLinks")
	}
	s.followCanonical(&c, page, u, nofollow || !handlerLinks)
	page.Links = len(c.Links)
	s.addEvent(&c, page)
	return c
}

// storeWARCUnless stores the response in WARC unless the page's robots
// directives say noindex or noarchive.
func (s *Slave) storeWARCUnless(c *frontier.Completion, u *url.URL, res *Response, d robots.Directives) string {
	if d.NoIndex || d.NoArchive {
		return ""
	}
	return s.storeWARC(c, u, res)
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), capped.
func retryAfter(h http.Header, cap time.Duration) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	if d < 0 {
		d = 0
	}
	return min(d, cap)
}

// backoff is the wait before a retry: Retry-After when the site gave one,
// else retry_base doubled per attempt with up to 25% jitter, capped.
func (s *Slave) backoff(attempt int, after time.Duration) time.Duration {
	if after > 0 {
		return after
	}
	d := s.cfg.Lease.RetryBase << min(attempt, 20)
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	return min(d, s.cfg.Lease.RetryMax)
}

func (s *Slave) addEvent(c *frontier.Completion, rec any) {
	ev, err := frontier.NewEvent(rec)
	if err != nil {
		s.log.Error("encode event", "err", err)
		return
	}
	c.Events = append(c.Events, ev)
}

func (s *Slave) exception(c *frontier.Completion, kind string, status int, msg string) {
	s.exceptionSnapshot(c, kind, status, msg, "")
}

// exceptionSnapshot records an exception with the path of an HTML snapshot
// (a failed render).
func (s *Slave) exceptionSnapshot(c *frontier.Completion, kind string, status int, msg, snapshot string) {
	s.errors.Add(1)
	s.met.Error(kind)
	host := c.Lease.Host
	if u, err := url.Parse(c.Lease.URL); err == nil {
		host = u.Hostname()
	}
	s.addEvent(c, &events.Exception{Crawl: s.cfg.Crawl.Name, Kind: kind, URL: c.Lease.URL, Host: host,
		Slave: s.id, Attempt: c.Lease.Attempt, Status: status, Message: msg, At: s.now().UnixMilli(),
		Snapshot: snapshot})
}

// robotsFor returns the robots.txt rules for a URL's host, fetching them
// while this slave holds the host's politeness slot; after such a fetch it
// waits the politeness delay before the page request, so the site never
// sees two requests closer than the delay.
func (s *Slave) robotsFor(ctx context.Context, u *url.URL, c *frontier.Completion, rs *rules.RuleSet) (*robots.Robots, error) {
	host := c.Lease.Host
	e, ok, err := s.robots.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if ok && (e.status == 0 || e.status >= 500) {
		return nil, &robotsError{host: host, status: e.status, cause: e.cause, cached: true}
	}
	rules := e.rules
	if !ok {
		if !s.mayFetch(c.Lease) {
			return nil, errGiveBack
		}
		rules, err = s.fetchRobots(ctx, u, host, rs)
		if err != nil {
			return nil, err
		}
		s.robotsSitemaps(c, u, rules)
		if err := s.sleepPolitely(ctx); err != nil {
			return nil, errShutdown
		}
	}
	if d := rules.CrawlDelay(s.cfg.Fetch.UserAgent); d > 0 {
		c.HostDelay = min(d, s.cfg.Politeness.MaxCrawlDelay)
		if c.HostDelay < s.cfg.Politeness.Delay {
			c.HostDelay = 0
		}
	}
	return rules, nil
}

// fetchRobots fetches robots.txt, following up to five redirects
// (RFC 9309 §2.3.1.2) and stores the result for every slave.
func (s *Slave) fetchRobots(ctx context.Context, u *url.URL, host string, rs *rules.RuleSet) (*robots.Robots, error) {
	target := robotsURL(u)
	fr := fetchRequest(target, rs) // the site's session, user agents and headers
	rec := frontier.RobotsRecord{FetchedAt: s.now()}
	var fetchErr error // why rec.Status is 0
	for hop := 0; ; hop++ {
		fr.URL = target
		res, err := s.fetcher.Fetch(ctx, fr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, errShutdown
			}
			rec.Status, fetchErr = 0, err // unreachable: disallow for now
			break
		}
		if res.Status >= 300 && res.Status < 400 && hop < 5 {
			base, _ := url.Parse(target)
			next, err := base.Parse(res.Header.Get("Location"))
			if err == nil && (next.Scheme == "http" || next.Scheme == "https") {
				res.Close()
				target = next.String()
				if err := s.sleepPolitely(ctx); err != nil {
					return nil, errShutdown
				}
				continue
			}
		}
		rec.Status = res.Status
		rec.Body, err = res.Body.Bytes()
		res.Close()
		if err != nil {
			rec.Status, fetchErr = 0, fmt.Errorf("read body: %w", err)
		}
		if res.Status >= 300 && res.Status < 400 {
			rec.Status = 404 // too many redirects: RFC 9309 treats it as unavailable (allow)
		}
		break
	}
	var cause robotsCause
	if rec.Status == 0 {
		if fetchErr == nil {
			fetchErr = errors.New("unreachable")
		}
		fe := classify(fetchErr)
		cause = robotsCause{kind: fe.Kind, msg: fe.Err.Error()}
		rec.Body = cause.body() // every slave reports the cause
	}
	rules, err := s.robots.fetched(ctx, host, rec)
	if err != nil {
		s.rl.Log(ctx, levelWarn, "robots-store", "store robots.txt", "host", host, "err", err)
	}
	if rec.Status == 0 || rec.Status >= 500 {
		return nil, &robotsError{host: host, status: rec.Status, cause: cause, err: fetchErr}
	}
	return rules, nil
}

// sleepPolitely waits the politeness delay with jitter.
func (s *Slave) sleepPolitely(ctx context.Context) error {
	d := s.cfg.Politeness.Delay
	if d <= 0 {
		return nil
	}
	d += time.Duration(rand.Float64() * s.cfg.Politeness.Jitter * float64(d))
	if !retry.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// noteFetch adds a fetch's duration to the moving average (1/8 weight; a
// lost update between two workers costs nothing that matters).
func (s *Slave) noteFetch(d time.Duration) {
	old := s.fetchAvg.Load()
	if old == 0 {
		s.fetchAvg.Store(int64(d))
		return
	}
	s.fetchAvg.Store(old + (int64(d)-old)/8)
}
