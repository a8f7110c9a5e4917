package slaved

import (
	"context"
	"fmt"
	"net/url"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/dnscache"
)

// Result is what the slave made of one URL (FetchOne): what a crawl
// would have sent to the frontier and the master.
type Result struct {
	Outcome    string // done, retry or fail
	Reason     string // why, for retry and fail
	Status     int    // HTTP status of the page record; 0 when none was recorded (a retry)
	Links      []string
	Items      []events.Item // the items that would be stored (none with Options.SkipItemStore)
	Exceptions []events.Exception
}

// FetchOne runs one absolute URL through the slave's pipeline as a task
// of depth 0 (OnRequest hooks, fetch, OnResponse hooks, content handler,
// OnItem hooks, link scope and trap filters) without Redis or a master,
// and returns what a crawl would have recorded. It is for trying hooks
// against a site, in tests and examples: robots.txt is not consulted,
// rule files are not loaded and nothing is stored, but OnItem sinks run.
// Calls are serialised; it must not be called while Run runs, and no hook
// may be registered after it.
func (s *Slave) FetchOne(ctx context.Context, rawURL string) (*Result, error) {
	s.running.Store(true)
	s.oneMu.Lock()
	defer s.oneMu.Unlock()
	if s.front != nil {
		return nil, fmt.Errorf("fetch one %s: the slave is running", rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() {
		return nil, fmt.Errorf("fetch one %q: not an absolute URL", rawURL)
	}
	if s.opt.Fetcher != nil {
		s.fetcher = s.opt.Fetcher
	} else {
		dns, err := dnscache.New(dnscache.Options{Server: s.cfg.DNS.Server, MinTTL: s.cfg.DNS.MinTTL,
			MaxTTL: s.cfg.DNS.MaxTTL, NegativeTTL: s.cfg.DNS.NegativeTTL, Timeout: s.cfg.DNS.Timeout,
			MaxEntries: s.cfg.DNS.CacheSize, MaxWorkers: 1, Logger: s.log})
		if err != nil {
			return nil, fmt.Errorf("fetch one: dns cache: %w", err)
		}
		defer dns.Close()
		sessCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		hf, err := s.newHTTPFetcher(sessCtx, dns)
		if err != nil {
			stop()
			return nil, fmt.Errorf("fetch one: %w", err)
		}
		defer func() { stop(); hf.close() }()
		s.fetcher = hf
		defer func() { s.fetcher = nil }()
	}
	c := s.process(ctx, frontier.Lease{Task: frontier.NewTask(u, 0, 0), Slave: s.id})
	r := &Result{Outcome: c.Outcome.String(), Reason: c.Reason}
	for _, l := range c.Links {
		r.Links = append(r.Links, l.URL)
	}
	for _, e := range c.Events {
		env, err := events.Decode("0-0", e.Type, e.Data)
		if err != nil {
			return nil, fmt.Errorf("fetch one %s: decode event: %w", rawURL, err)
		}
		switch {
		case env.Page != nil:
			r.Status = env.Page.Status
		case env.Item != nil:
			r.Items = append(r.Items, *env.Item)
		case env.Exception != nil:
			r.Exceptions = append(r.Exceptions, *env.Exception)
		}
	}
	return r, nil
}
