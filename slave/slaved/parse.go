package slaved

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/content"
)

// Parse: one URL through the slave's pipeline outside a crawl, with what
// the slave decided about it that a crawl only counts (the verdict of each
// link, robots.txt's): "slave parse". It runs process itself, the code a
// crawl runs, with a pageTrace that process and handle fill in.

// ParseOptions tune Parse.
type ParseOptions struct {
	// Rules is the rule set in force (nil: none), as a crawl's slave has
	// it from the master.
	Rules *rules.Set
	// Render renders the page in headless Chromium even when no render
	// rule covers it (with the rule's waits when one does); Parse fails
	// when this slave cannot render.
	Render bool
	// IgnoreRobots fetches the page without asking its robots.txt.
	IgnoreRobots bool
	// Body, when not nil, is the page itself (a saved copy): nothing is
	// fetched, robots.txt is not asked and nothing is rendered; the body
	// is handled as a 200 response of the URL with ContentType ("" = the
	// media type sniffed from the body).
	Body        []byte
	ContentType string
}

// Parsed is what the slave made of one URL (Parse): what a crawl would
// have recorded, and why.
type Parsed struct {
	// URL is the canonical URL, as a seed would be queued.
	URL string `json:"url"`
	// RuleSet and RuleFile name the rule set that covers URL; "" = none.
	RuleSet  string `json:"rule_set,omitempty"`
	RuleFile string `json:"rule_file,omitempty"`
	// Scope is "" when the crawl's scope and the rule set's take URL as
	// a seed, else why they do not (a crawl would not fetch it).
	Scope string `json:"out_of_scope,omitempty"`
	// Robots is robots.txt's verdict: "allowed", "disallowed for <agent>",
	// "unavailable: <why>" or "not asked: <why>".
	Robots string `json:"robots_txt"`
	// Render says whether the page is rendered in headless Chromium, and
	// why.
	Render string `json:"render"`
	// Outcome (done, retry or fail) and Reason are what the crawl's
	// frontier would be told.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Page is the page record a crawl stores; nil when no response was
	// handled (robots.txt disallowed it, the fetch failed).
	Page *events.Page `json:"page,omitempty"`
	// Items are the items a crawl stores for the page, through the OnItem
	// hooks.
	Items []ParsedItem `json:"items"`
	// Links are the URLs the page leads to and what becomes of each.
	Links []LinkVerdict `json:"links"`
	// Exceptions are the exceptions a crawl records for the page.
	Exceptions []ParsedException `json:"exceptions"`
}

// ParsedItem is an item as a crawl stores it (MySQL items).
type ParsedItem struct {
	Rule   string          `json:"rule"`
	Item   string          `json:"item"`
	URL    string          `json:"url"`
	Fields json.RawMessage `json:"fields"`
}

// ParsedException is an exception as a crawl records it.
type ParsedException struct {
	Kind    string `json:"kind"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

// Parse runs one absolute URL through the slave's pipeline as a crawl's
// seed would go (robots.txt, the rule set's session, user agents, headers
// and render decision, the fetch, the content handler, robots meta tags,
// the canonical URL, the rule set's items through the OnItem hooks, the
// scope and trap filters on its links) and says what a crawl would record
// and why. It touches no crawl state: no Redis, no MySQL, no WARC file,
// no render snapshot; robots.txt is fetched for the call and kept in
// memory, and the slave's content dedup is not consulted. Calls are
// serialised; it must not be called while Run runs. An error means the
// page could not be tried (a bad URL, rendering asked for and not
// possible); a fetch that fails is an outcome with its exceptions.
func (s *Slave) Parse(ctx context.Context, rawURL string, opt ParseOptions) (*Parsed, error) {
	s.running.Store(true)
	s.oneMu.Lock()
	defer s.oneMu.Unlock()
	if s.front != nil {
		return nil, fmt.Errorf("parse %s: the slave is running", rawURL)
	}
	u, err := s.canon.Canonicalize(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", rawURL, err)
	}
	if opt.Body != nil && opt.Render {
		return nil, fmt.Errorf("parse %s: a saved page is not rendered", u)
	}
	prevRules := s.ruleSet.Swap(opt.Rules)
	defer s.ruleSet.Store(prevRules)
	out := &Parsed{URL: u.String(), Items: []ParsedItem{}, Links: []LinkVerdict{}, Exceptions: []ParsedException{}}
	rs := s.ruleFor(u)
	if rs != nil {
		out.RuleSet, out.RuleFile = rs.Name, rs.File
	}
	task, _, why, ok := s.plan.Task(u, 0, 0, rs)
	if !ok {
		out.Scope, task = why, frontier.NewTask(u, 0, 0)
	}
	if opt.Body == nil {
		s.checkRenderer()
		defer s.closeRenderer()
		defer s.canRender.Store(false)
	}
	if out.Render, err = s.renderDecision(&task, rs, u, opt); err != nil {
		return nil, fmt.Errorf("parse %s: %w", u, err)
	}
	switch {
	case opt.Body != nil:
		out.Robots = "not asked: a saved page"
	case opt.IgnoreRobots:
		out.Robots = "not asked: robots.txt ignored"
	case !s.cfg.Politeness.ObeyRobots:
		out.Robots = "not asked: politeness.obey_robots is off"
	default:
		s.robots = newRobotsCache(&memRobots{}, s.cfg.Politeness.RobotsTTL, s.now)
		defer func() { s.robots = nil }()
	}
	dups := s.dups
	s.dups = newDupCache(16) // a page seen before is parsed all the same
	defer func() { s.dups = dups }()
	tr := &pageTrace{render: opt.Render}
	s.trace.Store(tr)
	defer s.trace.Store(nil)

	var c frontier.Completion
	lease := frontier.Lease{Task: task, Slave: s.id}
	if opt.Body != nil {
		s.fetcher = &bodyFetcher{url: u.String(), body: opt.Body, contentType: opt.ContentType, s: s}
		defer func() { s.fetcher = nil }()
		c = s.process(ctx, lease)
	} else if err := s.withFetcher(ctx, func() { c = s.process(ctx, lease) }); err != nil {
		return nil, fmt.Errorf("parse %s: %w", u, err)
	}

	out.Outcome, out.Reason = c.Outcome.String(), c.Reason
	if tr.robots != "" {
		out.Robots = tr.robots
	}
	out.Links = append(out.Links, tr.links...)
	envs, err := decodeEvents(c)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", u, err)
	}
	for _, env := range envs {
		switch {
		case env.Page != nil:
			out.Page = env.Page
		case env.Item != nil:
			out.Items = append(out.Items, ParsedItem{Rule: env.Item.Rule, Item: env.Item.Item, URL: env.Item.URL, Fields: env.Item.Data})
		case env.Exception != nil:
			x := env.Exception
			out.Exceptions = append(out.Exceptions, ParsedException{Kind: x.Kind, Status: x.Status, Message: x.Message})
		}
	}
	if out.Page != nil && out.Page.Rendered && !task.Render {
		out.Render = "rendered: a maybe_dynamic rule of rule set " + rs.Name + " found too few links statically"
	}
	return out, nil
}

// ErrCannotRender is Parse's error when rendering is asked for
// (ParseOptions.Render) and this slave cannot render.
var ErrCannotRender = errors.New("cannot render")

// renderDecision decides whether Parse renders a task (its Render), as a
// crawl would (a render rule covers it and this slave can render) or as
// asked (ParseOptions.Render), and says why. A task that must be
// rendered and cannot be is an ErrCannotRender.
func (s *Slave) renderDecision(task *frontier.Task, rs *rules.RuleSet, u *url.URL, opt ParseOptions) (string, error) {
	ruleRenders := rs != nil && rs.RenderFor(u) != nil
	task.Render = ruleRenders || opt.Render
	if opt.Body != nil {
		task.Render = false
		return "static: a saved page is not rendered", nil
	}
	off := s.renderOff()
	switch {
	case off != "" && opt.Render:
		return "", fmt.Errorf("%w: %s", ErrCannotRender, off)
	case off != "" && ruleRenders:
		task.Render = false
		return "static: rule set " + rs.Name + " renders it, but this slave cannot render (" + off + ")", nil
	case opt.Render:
		return "rendered: asked for", nil
	case ruleRenders:
		return "rendered: a render rule of rule set " + rs.Name + " covers it", nil
	}
	return "static: no render rule covers it", nil
}

// renderOff says why this slave cannot render, "" when it can
// (checkRenderer).
func (s *Slave) renderOff() string {
	switch {
	case s.canRender.Load():
		return ""
	case !s.cfg.Render.Enabled:
		return "render.enabled is false"
	}
	if _, err := os.Stat(s.cfg.Render.ChromePath); err != nil {
		return "no Chromium at " + s.cfg.Render.ChromePath
	}
	return "rendering is off"
}

// pageTrace is what process and handle decided about a page beyond its
// completion, noted for Parse (s.trace, nil in a crawl).
type pageTrace struct {
	// render is ParseOptions.Render: a page without a render rule is
	// rendered with DefaultRender
	render bool
	mu     sync.Mutex
	robots string        // robots.txt's verdict
	links  []LinkVerdict // every URL the page leads to
}

// DefaultRender is how a page without a render rule is rendered when
// ParseOptions.Render asks for it: until the network is idle (500 ms
// without a request) after the load event, at most
// rules.DefaultRenderTimeout.
var DefaultRender = rules.Render{Timeout: rules.DefaultRenderTimeout, WaitNetworkIdle: true}

// noteLinks notes links' verdicts for Parse.
func (s *Slave) noteLinks(vs ...LinkVerdict) {
	if tr := s.trace.Load(); tr != nil {
		tr.mu.Lock()
		tr.links = append(tr.links, vs...)
		tr.mu.Unlock()
	}
}

// noteDropped notes, for Parse, links a page has that are not followed.
func (s *Slave) noteDropped(links []*url.URL, verdict, reason string) {
	if s.trace.Load() == nil {
		return
	}
	vs := make([]LinkVerdict, len(links))
	for i, lu := range links {
		vs[i] = LinkVerdict{URL: lu.String(), Verdict: verdict, Reason: reason}
	}
	s.noteLinks(vs...)
}

// nofollowLinks are, for Parse, the links of a page that says nofollow:
// the handler's, or, when its robots meta tags made the HTML handler drop
// them, its links extracted again whatever the tags say. nil in a crawl.
func (s *Slave) nofollowLinks(d *Doc) []*url.URL {
	if s.trace.Load() == nil {
		return nil
	}
	if len(d.Links) > 0 || !d.NoFollow || d.Text == nil {
		return d.Links
	}
	opt := s.linkOpt
	opt.Encoding, opt.IgnoreRobots = d.Charset, true
	return s.canon.ExtractLinksWith(d.URL, d.Text, opt).URLs
}

// noteRobots notes robots.txt's verdict for Parse.
func (s *Slave) noteRobots(verdict string) {
	if tr := s.trace.Load(); tr != nil {
		tr.mu.Lock()
		tr.robots = verdict
		tr.mu.Unlock()
	}
}

// memRobots keeps robots.txt records in memory: the robots store of a
// slave outside a crawl (Parse).
type memRobots struct {
	mu sync.Mutex
	m  map[string]frontier.RobotsRecord
}

func (m *memRobots) GetRobots(_ context.Context, host string) (frontier.RobotsRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[host]
	return r, ok, nil
}

func (m *memRobots) PutRobots(_ context.Context, host string, r frontier.RobotsRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]frontier.RobotsRecord{}
	}
	m.m[host] = r
	return nil
}

// bodyFetcher answers the one URL of a saved page with its body, as a 200
// response (ParseOptions.Body).
type bodyFetcher struct {
	url, contentType string
	body             []byte
	s                *Slave
}

func (f *bodyFetcher) Fetch(_ context.Context, fr FetchRequest) (*Response, error) {
	if fr.URL != f.url {
		return nil, &FetchError{Kind: events.KindOther, Err: errors.New("a saved page answers its own URL only")}
	}
	cfg := f.s.cfg.Fetch
	b, err := content.ReadBody(bytes.NewReader(f.body), content.BodyOptions{MemLimit: int(cfg.MemoryBodyBytes),
		MaxBytes: cfg.MaxBodyBytes, TempDir: cfg.TempDir, SizeHint: int64(len(f.body))})
	if err != nil {
		return nil, &FetchError{Kind: events.KindOther, Err: fmt.Errorf("read saved page: %w", err)}
	}
	h := http.Header{}
	if f.contentType != "" {
		h.Set("Content-Type", f.contentType)
	}
	return &Response{Status: http.StatusOK, Proto: "HTTP/1.1", Header: h, Body: b}, nil
}
