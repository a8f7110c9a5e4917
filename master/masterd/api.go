package masterd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/rules"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// apiComponent serves the work API (api.listen): slaves on machines you do
// not trust get and return work through it with a token.
type apiComponent struct {
	api *workapi.Server
	srv *http.Server
	ln  net.Listener
	tls bool
	log *slog.Logger
}

func (a *apiComponent) run(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); a.api.Run(ctx) }()
	errc := make(chan error, 1)
	go func() {
		if a.tls {
			errc <- a.srv.ServeTLS(a.ln, "", "")
		} else {
			errc <- a.srv.Serve(a.ln)
		}
	}()
	select {
	case <-ctx.Done():
		a.api.Stop() // the watches answer now: Shutdown waits for requests
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = a.srv.Shutdown(sctx)
		<-errc
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("work API server stopped", "err", err)
		}
	}
	<-done
}

// apiServer listens on api.listen; a port in use is an error, not a master
// without its API. match gives a URL's rule set (the rules in force).
func (m *Master) apiServer(match func() *rules.Set, met *metrics.Master) (*apiComponent, error) {
	planner, err := plan.New(m.cfg)
	if err != nil {
		return nil, fmt.Errorf("master: work API: %w", err)
	}
	tlsCfg, err := m.cfg.APITLSConfig()
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	ln, err := net.Listen("tcp", m.cfg.API.Listen)
	if err != nil {
		return nil, fmt.Errorf("master: api.listen: %w", err)
	}
	a := m.cfg.API
	srv := workapi.New(workapi.Options{Crawl: m.cfg.Crawl.Name, Front: m.front, Tokens: storeTokens{m.store},
		Planner: linkPlanner{planner: planner, rules: match, known: m.front.KnownLink}, Library: frontier.LibraryName(),
		Limits: workapi.Limits{MaxInFlight: a.MaxInFlight, Rate: a.Rate, MaxBody: a.MaxBody, MaxLinks: a.MaxLinks,
			EventRate: float64(a.EventRate), MaxStream: a.MaxStream, DecodeBudget: a.DecodeBudget},
		MaxRedirects: m.cfg.Crawl.MaxRedirects,
		Log:          m.log, RL: m.rl, Limited: met.APILimited, Invalid: met.APIInvalid, Served: func(path string, d time.Duration) {
			met.APIServed(path, d)
			if m.opt.APIServed != nil {
				m.opt.APIServed(path, d)
			}
		}})
	// a request's headers in 10 s and its body in a minute (a largest body
	// over a slow link), an idle connection kept two minutes
	hs := &http.Server{Handler: srv.Handler(), TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	m.log.Info("work API listening", "url", scheme+ln.Addr().String(), "max_in_flight", a.MaxInFlight, "rate", a.Rate)
	if m.opt.APIReady != nil {
		m.opt.APIReady(ln.Addr().String())
	}
	return &apiComponent{api: srv, srv: hs, ln: ln, tls: tlsCfg != nil, log: m.log}, nil
}

// storeTokens finds the work API's tokens in MySQL.
type storeTokens struct{ st *store.Store }

func (s storeTokens) TokenByHash(ctx context.Context, raw string) (workapi.Token, bool, error) {
	t, ok, err := s.st.TokenByHash(ctx, store.TokenHash(raw))
	if err != nil || !ok {
		return workapi.Token{}, false, err
	}
	return workapi.Token{ID: t.ID, Crawl: t.Crawl, Slave: t.Slave, Revoked: t.Revoked(),
		MaxInFlight: t.Limits.MaxInFlight, Rate: t.Limits.Rate}, true, nil
}

// linkPlanner plans the links a slave of the work API reports, as a
// direct slave plans its own (shared/plan) with the rule set in force.
type linkPlanner struct {
	planner *plan.Planner
	rules   func() *rules.Set
	// known is the frontier's link cache (frontier.Redis.KnownLink)
	known func(url string) bool
}

// Known: a link the frontier already put through the seen set, while no
// rule file sets a host's politeness (a link planned carries its host's,
// which must reach the frontier even for a link found again: a rule
// file's new delay takes effect with the next page that links the host).
func (p linkPlanner) Known(url string) bool {
	if p.known == nil || !p.known(url) {
		return false
	}
	if p.rules != nil {
		if set := p.rules(); set != nil && set.SetsPoliteness() {
			return false
		}
	}
	return true
}

// Link plans a link whose depth, hops and sitemap level the work API set
// from its lease's (workapi: linkOf).
func (p linkPlanner) Link(l api.Link) (frontier.Task, *frontier.HostPolicy, bool) {
	var match func(*url.URL) *rules.RuleSet
	if p.rules != nil {
		if set := p.rules(); set != nil {
			match = set.Match
		}
	}
	t, policy, err := p.planner.Reported(l.URL, l.Depth, l.Hops, match)
	if err != nil {
		return frontier.Task{}, nil, false
	}
	t.Sitemap, t.SitemapAnyHost, t.LastMod = l.Sitemap, l.SitemapAnyHost && l.Sitemap > 0, l.LastMod
	return t, policy, true
}
