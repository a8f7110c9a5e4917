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
	var c frontier.Completion
	if err := s.withFetcher(ctx, func() {
		c = s.process(ctx, frontier.Lease{Task: frontier.NewTask(u, 0, 0), Slave: s.id})
	}); err != nil {
		return nil, fmt.Errorf("fetch one: %w", err)
	}
	r := &Result{Outcome: c.Outcome.String(), Reason: c.Reason}
	for _, l := range c.Links {
		r.Links = append(r.Links, l.URL)
	}
	envs, err := decodeEvents(c)
	if err != nil {
		return nil, fmt.Errorf("fetch one %s: %w", rawURL, err)
	}
	for _, env := range envs {
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

// decodeEvents decodes the events of a completion (FetchOne, Parse).
func decodeEvents(c frontier.Completion) ([]events.Envelope, error) {
	envs := make([]events.Envelope, 0, len(c.Events))
	for _, e := range c.Events {
		env, err := events.Decode("0-0", e.Type, e.Data)
		if err != nil {
			return nil, fmt.Errorf("decode event: %w", err)
		}
		envs = append(envs, env)
	}
	return envs, nil
}

// withFetcher runs fn with the slave's fetcher up outside Run (FetchOne,
// Parse): Options.Fetcher, or an HTTP fetcher over a DNS cache of its own,
// closed when fn returns.
func (s *Slave) withFetcher(ctx context.Context, fn func()) error {
	if s.opt.Fetcher != nil {
		s.fetcher = s.opt.Fetcher
		defer func() { s.fetcher = nil }()
		fn()
		return nil
	}
	dns, err := dnscache.New(dnscache.Options{Server: s.cfg.DNS.Server, MinTTL: s.cfg.DNS.MinTTL,
		MaxTTL: s.cfg.DNS.MaxTTL, NegativeTTL: s.cfg.DNS.NegativeTTL, Timeout: s.cfg.DNS.Timeout,
		MaxEntries: s.cfg.DNS.CacheSize, MaxWorkers: 1, Logger: s.log})
	if err != nil {
		return fmt.Errorf("dns cache: %w", err)
	}
	defer dns.Close()
	s.dns = dns // the renderer's lookups, the private-network guard
	defer func() { s.dns = nil }()
	sessCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	hf, err := s.newHTTPFetcher(sessCtx, dns)
	if err != nil {
		stop()
		return err
	}
	defer func() { stop(); hf.close() }()
	s.fetcher = hf
	defer func() { s.fetcher = nil }()
	fn()
	return nil
}
