package workapi

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// A slave of the API is believed only about the leases its token holds.
// Before a completion reaches the frontier the API takes what the
// frontier recorded of its lease: its URL, its task's depth, hops,
// sitemap level and attempt, and when it was leased (from the claim that
// served it, servedLeases, or else Frontier.HeldLeases). Then:
//   - every record of the completion must be about that lease: a page, an
//     item or a duplicate of its URL, an exception of its URL and host (or
//     of none), a proxy's state; a record of another URL, and a slave,
//     heartbeat or lost record, is refused (invalid_input, recorded);
//   - the master sets what it knows: the crawl and the slave (the
//     token's), a page's depth, attempt and lastmod (the lease's), and
//     every time within [leased at, received]: an item dated in the future
//     cannot win over a later honest fetch of its URL;
//   - a link's depth, hops and sitemap level follow the lease's, whatever
//     the slave sends (linkOf): a link one deeper, a redirect at the same
//     depth one hop further (within crawl.max_redirects), a sitemap one
//     level below the lease's sitemap, or a host's own sitemap at the
//     lease's depth;
//   - its content hash counts among its own pages only
//     (frontier.Completion.ContentScope).
//
// A completion of a lease the slave does not hold goes on bare (its
// outcome alone): the function complete refuses it, as it refuses any
// whose lease is lost by the time it runs (it checks again, atomically).
// Records that belong to no page (a proxy's state, a slave's own trouble)
// go through /events (slaveEvents).

// masterKinds are exception kinds only the master records: a slave
// reporting one is refused.
var masterKinds = map[string]bool{events.KindForgedEvent: true, events.KindAPILimit: true, events.KindInvalidInput: true}

// completions judges a request's completions against the leases they
// name, and applies the token's event budgets (eventBudget).
func (s *Server) completions(ctx context.Context, q request, wcs []api.Completion) ([]frontier.Completion, error) {
	refs := make([]frontier.Lease, len(wcs))
	for i, wc := range wcs {
		l, err := s.leaseRef(wc.Lease)
		if err != nil {
			return nil, err
		}
		refs[i] = l
	}
	leases, held, err := s.heldLeases(ctx, q.token.Slave, refs)
	if err != nil {
		return nil, err
	}
	for i := range refs {
		if held[i] {
			refs[i].Host = leases[i].Host // the same URL's
		} else {
			refs[i].Host = refHost(refs[i].URL)
		}
	}
	cs := make([]frontier.Completion, len(wcs))
	evBytes, shards := 0, map[int]bool{}
	for i, wc := range wcs {
		c, err := s.completion(q, wc, refs[i], leases[i], held[i])
		if err != nil {
			return nil, err
		}
		for _, e := range c.Events {
			evBytes += len(e.Data)
		}
		if len(c.Events) > 0 {
			shards[refs[i].Shard] = true
		}
		cs[i] = c
	}
	if err := s.eventBudget(ctx, q, evBytes, shards); err != nil {
		return nil, err
	}
	return cs, nil
}

// heldLeases is Frontier.HeldLeases for the leases refs names that this
// server did not serve to slave (servedLeases), and those it served.
func (s *Server) heldLeases(ctx context.Context, slave string, refs []frontier.Lease) ([]frontier.Lease, []bool, error) {
	leases, held := make([]frontier.Lease, len(refs)), make([]bool, len(refs))
	var miss []int
	for i, r := range refs {
		if l, ok := s.served.take(slave, r); ok {
			leases[i], held[i] = l, true
		} else {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return leases, held, nil
	}
	sub := make([]frontier.Lease, len(miss))
	for j, i := range miss {
		sub[j] = refs[i]
	}
	subLeases, subHeld, err := s.opt.Front.HeldLeases(ctx, slave, sub)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range miss {
		leases[i], held[i] = subLeases[j], subHeld[j]
	}
	return leases, held, nil
}

// completion makes a slave's completion of the lease ref (as it names it;
// le as the frontier leased it, held whether the slave holds it) the
// frontier's.
func (s *Server) completion(q request, wc api.Completion, ref, le frontier.Lease, held bool) (frontier.Completion, error) {
	c := frontier.Completion{Lease: ref, ContentScope: q.token.Slave}
	switch wc.Outcome {
	case api.OutcomeDone:
		c.Outcome = frontier.Done
	case api.OutcomeRetry:
		c.Outcome = frontier.Retry
	case api.OutcomeFail:
		c.Outcome = frontier.Fail
	case api.OutcomeRelease:
		c.Outcome = frontier.Release
	default:
		return c, refuse(http.StatusBadRequest, "complete: unknown outcome")
	}
	if wc.ContentHash != "" {
		b, err := hex.DecodeString(wc.ContentHash)
		if err != nil || len(b) != 8 {
			return c, refuse(http.StatusBadRequest, "complete: content_hash must be 16 hex digits")
		}
		for _, x := range b {
			c.ContentHash = c.ContentHash<<8 | uint64(x)
		}
	}
	c.HostDelay = time.Duration(max(wc.HostDelayMs, 0)) * time.Millisecond
	c.Backoff = time.Duration(max(wc.BackoffMs, 0)) * time.Millisecond
	c.RetryIn = time.Duration(max(wc.RetryInMs, 0)) * time.Millisecond
	c.Reason = clip(wc.Reason, 1024)
	if err := eventSizes(wc.Events); err != nil {
		return c, err
	}
	if !held {
		return c, nil // the function finds it lost: nothing of it is applied
	}
	c.Events = s.leaseEvents(q, le, wc.Events)
	if c.Outcome != frontier.Done {
		return c, nil
	}
	if len(wc.Links) > 0 {
		c.Links = make([]frontier.Task, 0, len(wc.Links))
	}
	for _, wl := range wc.Links {
		if s.opt.Planner.Known(wl.URL) {
			continue
		}
		l, ok := s.linkOf(le, wl)
		if !ok {
			s.invalid(q, "link", "a link no page of "+clip(le.URL, 200)+" leads to (redirect hops past "+
				strconv.Itoa(s.opt.MaxRedirects)+", or a sitemap level out of turn)")
			continue
		}
		t, policy, ok := s.opt.Planner.Link(l)
		if !ok {
			continue
		}
		c.Links = append(c.Links, t)
		if policy != nil {
			if c.Policies == nil {
				c.Policies = map[string]frontier.HostPolicy{}
			}
			c.Policies[t.Host] = *policy
		}
	}
	return c, nil
}

// maxSitemapLevel is the deepest sitemap nesting followed (the slave's
// own limit).
const maxSitemapLevel = 3

// linkOf is the link wl of a page of the lease le with the depth, hops
// and sitemap level the lease leads to; false for one no page of le can
// lead to. What kind of link it is the slave says (hops: a redirect's
// target; a sitemap level: a sitemap), everything else is the lease's.
func (s *Server) linkOf(le frontier.Lease, wl api.Link) (api.Link, bool) {
	l := api.Link{URL: wl.URL, LastMod: wl.LastMod}
	switch {
	case wl.Hops > 0:
		// a redirect's target: the page's depth, one hop more, and a
		// sitemap's marks carried
		if le.Hops+1 > s.opt.MaxRedirects {
			return l, false
		}
		l.Depth, l.Hops, l.Sitemap, l.SitemapAnyHost, l.LastMod = le.Depth, le.Hops+1, le.Sitemap, le.SitemapAnyHost, le.LastMod
	case wl.Sitemap > 0:
		switch next := max(le.Sitemap, 1) + 1; {
		case wl.Sitemap == next && next <= maxSitemapLevel:
			// a sitemap an index lists: as the index may list
			l.SitemapAnyHost = le.SitemapAnyHost
		case wl.Sitemap == 1:
			// a host's robots.txt Sitemap: lines (any host in scope)
			// or its /sitemap.xml
			l.SitemapAnyHost = wl.SitemapAnyHost
		default:
			return l, false
		}
		l.Depth, l.Sitemap = le.Depth, wl.Sitemap
	default:
		l.Depth = le.Depth + 1
	}
	return l, true
}

// leaseEvents keeps the records of a completion that are about its lease
// le, with the master's crawl, slave, times and depth; it records the
// others it refuses.
func (s *Server) leaseEvents(q request, le frontier.Lease, in []api.Event) []frontier.Event {
	out := make([]frontier.Event, 0, len(in))
	lo, hi := le.LeasedAt.UnixMilli(), q.received.UnixMilli()
	for _, e := range in {
		env, err := events.Decode("", e.Type, e.Data)
		if err != nil {
			s.invalid(q, string(e.Type), "a record that does not decode: "+clip(err.Error(), 200))
			continue
		}
		crawl, slave := s.opt.Crawl, q.token.Slave
		why, ch := "", false // ch: a field the master sets was not as it sets it
		switch {
		case env.Page != nil:
			p := env.Page
			switch {
			case p.URL != le.URL:
				why = "a page of " + quoteURL(p.URL) + ", not of its lease " + quoteURL(le.URL)
			case p.FinalURL != "" && p.FinalURL != p.URL && !httpURL(p.FinalURL):
				why = "a page whose final URL is no http(s) URL"
			}
			set(&ch, &p.Crawl, crawl)
			set(&ch, &p.Slave, slave)
			set(&ch, &p.Depth, le.Depth)
			set(&ch, &p.Attempt, le.Attempt)
			set(&ch, &p.LastMod, le.LastMod)
			set(&ch, &p.FetchedAt, clamp(p.FetchedAt, lo, hi))
		case env.Item != nil:
			it := env.Item
			if it.URL != le.URL {
				why = "an item of " + quoteURL(it.URL) + ", not of its lease " + quoteURL(le.URL)
			}
			set(&ch, &it.Crawl, crawl)
			set(&ch, &it.Slave, slave)
			set(&ch, &it.FetchedAt, clamp(it.FetchedAt, lo, hi))
		case env.Duplicate != nil:
			d := env.Duplicate
			switch {
			case d.URL != le.URL:
				why = "a duplicate of " + quoteURL(d.URL) + ", not of its lease " + quoteURL(le.URL)
			case !sameURLHost(d.FirstURL, le.URL):
				why = "a duplicate whose first URL is on another host than its lease's"
			}
			set(&ch, &d.Crawl, crawl)
			set(&ch, &d.Slave, slave)
			set(&ch, &d.At, clamp(d.At, lo, hi))
		case env.Exception != nil:
			x := env.Exception
			switch {
			case x.URL != "" && x.URL != le.URL:
				why = "an exception of " + quoteURL(x.URL) + ", not of its lease " + quoteURL(le.URL)
			case x.Host != "" && x.Host != le.Host && !strings.EqualFold(x.Host, hostname(le.URL)):
				why = "an exception of host " + quoteURL(x.Host) + ", not of its lease's"
			case masterKinds[x.Kind]:
				why = "an exception of kind " + x.Kind + ", which only the master records"
			}
			set(&ch, &x.Crawl, crawl)
			set(&ch, &x.Slave, slave)
			set(&ch, &x.Attempt, le.Attempt)
			set(&ch, &x.At, clamp(x.At, lo, hi))
		case env.Proxy != nil:
			pr := env.Proxy
			set(&ch, &pr.Crawl, crawl)
			set(&ch, &pr.Slave, slave)
			set(&ch, &pr.At, clamp(pr.At, lo, hi))
		default:
			why = "a " + string(e.Type) + " record, which a slave may not send"
		}
		if why != "" {
			s.invalid(q, string(e.Type), "completion of "+clip(le.URL, 200)+": "+why)
			continue
		}
		if !ch {
			// the record reads as the master would write it: its bytes go
			// on as they came, since the sink decodes them as they were
			// decoded here (events.Decode), to the same record
			out = append(out, frontier.Event{Type: e.Type, Data: e.Data})
			continue
		}
		if ev, err := frontier.NewEvent(record(&env)); err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// slaveEvents judges the records a slave sends apart from its leases
// (/events): only those of no page, a proxy's state or an exception of no
// URL and no host (a render pool that failed), with the master's crawl,
// slave and times at most now. A request with any other is refused whole
// (its records recorded as invalid_input).
func (s *Server) slaveEvents(ctx context.Context, q request, in []api.Event) ([]frontier.Event, error) {
	if err := eventSizes(in); err != nil {
		return nil, err
	}
	out := make([]frontier.Event, 0, len(in))
	hi := q.received.UnixMilli()
	bytes := 0
	for i, e := range in {
		env, err := events.Decode("", e.Type, e.Data)
		why := ""
		switch {
		case err != nil:
			why = "a record that does not decode: " + clip(err.Error(), 200)
		case env.Proxy != nil:
			env.Proxy.Crawl, env.Proxy.Slave, env.Proxy.At = s.opt.Crawl, q.token.Slave, min(env.Proxy.At, hi)
		case env.Exception != nil && (env.Exception.URL != "" || env.Exception.Host != ""):
			why = "an exception of a URL or host: send it with its lease's completion"
		case env.Exception != nil && masterKinds[env.Exception.Kind]:
			why = "an exception of kind " + env.Exception.Kind + ", which only the master records"
		case env.Exception != nil:
			x := env.Exception
			x.Crawl, x.Slave, x.At = s.opt.Crawl, q.token.Slave, min(x.At, hi)
		default:
			why = "a " + string(e.Type) + " record: only a completion of its lease may carry one"
		}
		if why != "" {
			s.invalid(q, string(e.Type), "events: "+why)
			return nil, refuse(http.StatusBadRequest, "event "+strconv.Itoa(i)+": "+why)
		}
		ev, err := frontier.NewEvent(record(&env))
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "event "+strconv.Itoa(i)+": "+clip(err.Error(), 200))
		}
		bytes += len(ev.Data)
		out = append(out, ev)
	}
	if err := s.eventBudget(ctx, q, bytes, map[int]bool{0: true}); err != nil {
		return nil, err
	}
	return out, nil
}

// maxEventBytes is the longest record a slave may send (the frontier's
// own limit).
const maxEventBytes = 1 << 20

// eventSizes refuses records over maxEventBytes.
func eventSizes(evs []api.Event) error {
	for _, e := range evs {
		if len(e.Data) > maxEventBytes {
			return refuse(http.StatusRequestEntityTooLarge, "an event over 1 MiB")
		}
	}
	return nil
}

// record is the one record an envelope holds.
func record(env *events.Envelope) any {
	switch {
	case env.Page != nil:
		return env.Page
	case env.Item != nil:
		return env.Item
	case env.Duplicate != nil:
		return env.Duplicate
	case env.Exception != nil:
		return env.Exception
	case env.Proxy != nil:
		return env.Proxy
	case env.Slave != nil:
		return env.Slave
	case env.Heartbeat != nil:
		return env.Heartbeat
	case env.Lost != nil:
		return env.Lost
	}
	return nil
}

// eventBudget applies the token's budgets to n bytes of events bound for
// its streams on shards: the unread events of each stream (MaxStream),
// then its bytes a second (EventRate). Over one, the request waits: 429
// with Retry-After.
func (s *Server) eventBudget(ctx context.Context, q request, n int, shards map[int]bool) error {
	if n == 0 {
		return nil
	}
	if lim := s.opt.Limits.MaxStream; lim > 0 {
		for k := range shards {
			size, err := s.streams.get(ctx, s.opt.Front, q.token.Slave, k)
			if err != nil {
				return err
			}
			if size > lim {
				s.limited(q, "stream", "its event stream holds "+strconv.FormatInt(size, 10)+
					" bytes the sink has not stored (at most "+strconv.FormatInt(lim, 10)+")")
				return &errRefused{status: http.StatusTooManyRequests, retryAfter: streamRetry,
					msg: "the slave's events wait for the master to store them: try again"}
			}
		}
	}
	if rate := s.opt.Limits.EventRate; rate > 0 {
		burst := max(4*rate, float64(s.opt.Limits.MaxBody))
		if wait := s.evBytes.take(q.token.ID, rate, burst, float64(n), time.Now()); wait > 0 {
			s.limited(q, "event_bytes", "over "+strconv.FormatFloat(rate, 'f', 0, 64)+" bytes of events a second")
			return &errRefused{status: http.StatusTooManyRequests, retryAfter: wait,
				msg: "over the token's bytes of events a second"}
		}
	}
	return nil
}

// streamRetry is when a slave whose stream is full asks again, and how
// long a stream's size is trusted.
const streamRetry = time.Second

// streamSizes caches the sizes of the slaves' streams for streamRetry.
type streamSizes struct {
	mu sync.Mutex
	m  map[streamKey]streamSize
}

type streamKey struct {
	slave string
	shard int
}

type streamSize struct {
	bytes int64
	at    time.Time
}

func (c *streamSizes) get(ctx context.Context, f Frontier, slave string, shard int) (int64, error) {
	k, now := streamKey{slave, shard}, time.Now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < streamRetry {
		return e.bytes, nil
	}
	n, err := f.SlaveStreamBytes(ctx, slave, shard)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.m[k] = streamSize{bytes: n, at: now}
	c.mu.Unlock()
	return n, nil
}

// invalid counts and records a record refused as about no lease of the
// token's: a metric each time, an invalid_input exception on the slave's
// stream at most once a minute per token and kind of record.
func (s *Server) invalid(q request, what, msg string) {
	if s.opt.Invalid != nil {
		s.opt.Invalid(q.token.Slave, what)
	}
	s.note(q, "invalid/"+what, events.KindInvalidInput, msg)
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// set sets *p to v, and *changed when it was not v.
func set[T comparable](changed *bool, p *T, v T) {
	if *p != v {
		*p, *changed = v, true
	}
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && len(s) <= urlx.MaxURLLength
}

// sameURLHost reports whether two URLs are of one host.
func sameURLHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Hostname(), ub.Hostname())
}

// sameHost reports whether the host of addr (host:port, a literal IP) is
// the address remote (a connection's RemoteAddr) comes from.
func sameHost(addr, remote string) bool {
	h, _, err := splitHostPort(addr)
	r, _, err2 := splitHostPort(remote)
	return err == nil && err2 == nil && h.IsValid() && h == r
}

// hostname is a URL's host name (without a port), "" for none.
func hostname(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func quoteURL(s string) string { return strconv.Quote(clip(s, 120)) }
