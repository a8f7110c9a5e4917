package slaved

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// dynLearner remembers, per "maybe dynamic" URL pattern of a rule set,
// whether rendering found more links than the static page had.
type dynLearner struct {
	mu sync.Mutex
	m  map[string]bool
}

func (d *dynLearner) get(key string) (helps, known bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	helps, known = d.m[key]
	return
}

func (d *dynLearner) set(key string, helps bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]bool{}
	}
	if len(d.m) > 10000 {
		clear(d.m)
	}
	d.m[key] = helps
}

// maybeDynamic handles a static HTML page that a rule marks "maybe
// dynamic" and that has fewer links than the rule expects: the first such
// page of a URL pattern is rendered once and the outcome learned. When the
// rendered page has more links the slave renders that pattern's pages from
// then on, and tells the admin (a render exception naming the pattern) so
// the pattern can become a render rule; when it does not, the pattern
// stays static. It returns the rendered document, or nil.
func (s *Slave) maybeDynamic(ctx context.Context, c *frontier.Completion, rs *rules.RuleSet, doc *Doc) *Doc {
	rr := rs.MaybeDynamicFor(doc.URL)
	if rr == nil || !rr.ShouldRender(len(doc.Links)) || !s.canRender.Load() {
		return nil
	}
	key := rs.Name + "|" + strings.Join(rr.MaybeDynamic.Match, "|")
	helps, known := s.dyn.get(key)
	if known && !helps {
		return nil
	}
	release, err := s.acquire(ctx, true)
	if err != nil {
		return nil
	}
	defer release()
	res, err := s.renderFetch(ctx, c.Lease, rs, rr)
	if err != nil {
		s.log.Debug("maybe-dynamic render failed", "url", c.Lease.URL, "err", err)
		return nil
	}
	defer res.Close()
	rd := &Doc{URL: doc.URL, Lease: doc.Lease, MediaType: "text/html", Header: res.Header, Body: res.Body}
	if err := (htmlHandler{s: s}).Handle(ctx, rd); err != nil {
		return nil
	}
	// the rendered body is closed when this returns: keep its text
	rd.Body = doc.Body
	more := len(rd.Links) > len(doc.Links)
	if !known {
		s.dyn.set(key, more)
		verdict := "rendering finds no more links: the pattern stays static"
		if more {
			verdict = "rendering finds more links: this slave now renders the pattern; make it a render rule"
		}
		s.log.Info("maybe-dynamic pattern learned", "rule", rs.Name, "pattern", rr.MaybeDynamic.Match,
			"static_links", len(doc.Links), "rendered_links", len(rd.Links), "url", c.Lease.URL)
		s.exception(c, events.KindRender, 0, fmt.Sprintf("rule %s maybe_dynamic %v: %d links static, %d rendered: %s",
			rs.Name, rr.MaybeDynamic.Match, len(doc.Links), len(rd.Links), verdict))
	}
	if !more {
		return nil
	}
	return rd
}
