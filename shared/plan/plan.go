// Package plan makes the frontier's tasks of the URLs a crawl finds: the
// crawl's scope (crawl.allow_hosts, allow, deny, max_depth), its trap
// filters, the rule sets' scopes, render routing and politeness, and the
// strategy's priority and score. A slave plans the links of its pages with
// it; the master plans seeds with it and, for slaves of the work API, the
// links they report, so a URL is planned the same way whoever found it.
package plan

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Planner plans tasks for one crawl. It is immutable and safe for
// concurrent use.
type Planner struct {
	canon    *urlx.Canonicalizer
	scope    *urlx.Scope
	traps    *urlx.Traps
	strategy string
	dates    bool // crawl.max_date_variants is on: a query's date is read
}

// New returns the planner of a validated config.
func New(cfg *config.Config) (*Planner, error) {
	canon, err := cfg.Canonicalizer()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	scope, err := urlx.NewScope(cfg.Crawl.AllowHosts, cfg.Crawl.Allow, cfg.Crawl.Deny, cfg.Crawl.MaxDepth)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	traps, err := urlx.NewTraps(urlx.TrapOptions{MaxURLLength: cfg.Crawl.MaxURLLength,
		MaxPathRepeat: cfg.Crawl.MaxPathRepeat, MaxPathSegments: cfg.Crawl.MaxPathSegments,
		MaxQueryParams: cfg.Crawl.MaxQueryParams})
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return &Planner{canon: canon, scope: scope, traps: traps, strategy: cfg.Crawl.Strategy,
		dates: cfg.Crawl.MaxDateVariants > 0}, nil
}

// Canonicalizer is the crawl's canonical form of URLs.
func (p *Planner) Canonicalizer() *urlx.Canonicalizer { return p.canon }

// Scope is the crawl's scope.
func (p *Planner) Scope() *urlx.Scope { return p.scope }

// Traps are the crawl's trap filters.
func (p *Planner) Traps() *urlx.Traps { return p.traps }

// Trap reports whether a canonical URL is a crawler trap and why.
func (p *Planner) Trap(u *url.URL) (trap bool, why string) {
	ok, why := p.traps.Check(u)
	return !ok, why
}

// Task plans the task of a canonical URL u, found at depth after hops
// redirects, whose rule set is rs (nil: none): ok is false when the
// crawl's scope or the rule set's refuses it (why says which). policy,
// when set, is its host's politeness from the rule set.
func (p *Planner) Task(u *url.URL, depth, hops int, rs *rules.RuleSet) (t frontier.Task, policy *frontier.HostPolicy, why string, ok bool) {
	if ok, why := p.scope.Check(u, depth); !ok {
		return frontier.Task{}, nil, "out of scope (" + why + ")", false
	}
	t = frontier.NewTask(u, depth, hops)
	if u.RawQuery != "" {
		t.PathKey = urlx.PathKey(u)
		// parses the query: only when the frontier reads it
		t.DateQuery = p.dates && urlx.DateQuery(u)
	}
	if p.strategy == frontier.StrategyPriority {
		t.Score = Importance(u) // only the priority strategy reads it
	}
	if rs == nil {
		return t, nil, "", true
	}
	if ok, why := rs.InScope(u, depth); !ok {
		return frontier.Task{}, nil, fmt.Sprintf("out of the scope of rule set %s (%s)", rs.Name, why), false
	}
	t.Render = rs.RenderFor(u) != nil
	if rs.Strategy == frontier.StrategyDFS && (p.strategy == frontier.StrategyBFS || p.strategy == frontier.StrategyDFS || p.strategy == "") {
		t.Priority = -int64(depth) // deepest first within the site's queue
	}
	if hp, ok := HostPolicy(rs); ok {
		policy = &hp
	}
	return t, policy, "", true
}

// ErrTrap is a URL the trap filters refuse.
var ErrTrap = errors.New("crawler trap")

// Reported plans a URL as a slave reported it (the work API's links): a
// URL string, canonicalized here, trap-checked, then planned as Task does
// with the rule set match gives (nil: none).
func (p *Planner) Reported(raw string, depth, hops int, match func(*url.URL) *rules.RuleSet) (frontier.Task, *frontier.HostPolicy, error) {
	u, err := p.canon.Canonicalize(raw)
	if err != nil {
		return frontier.Task{}, nil, fmt.Errorf("plan %.80q: %w", raw, err)
	}
	if trap, why := p.Trap(u); trap {
		return frontier.Task{}, nil, fmt.Errorf("plan %.80q: %w: %s", raw, ErrTrap, why)
	}
	var rs *rules.RuleSet
	if match != nil {
		rs = match(u)
	}
	t, policy, why, ok := p.Task(u, depth, hops, rs)
	if !ok {
		return frontier.Task{}, nil, fmt.Errorf("plan %.80q: %s", raw, why)
	}
	return t, policy, nil
}

// Importance is IL(P), the URL-string importance of the priority
// strategy, in [0, 1]: shallow paths, no query string and directory or
// index pages rank higher (a home or section page links to more of a
// site than a deep article or a filtered listing).
func Importance(u *url.URL) float64 {
	segs := strings.Count(strings.Trim(u.EscapedPath(), "/"), "/")
	if strings.Trim(u.EscapedPath(), "/") != "" {
		segs++
	}
	score := 1 - 0.08*float64(min(segs, 10))
	if u.RawQuery != "" {
		score -= 0.2
	}
	path := u.Path
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, "/index.html") || strings.HasSuffix(path, "/index.htm") {
		score += 0.1
	}
	return min(max(score, 0), 1)
}

// HostPolicy is a rule set's politeness for its hosts, if it sets any (for the
// frontier, with links or seeds). A jitter the rule set leaves unset is
// -1: the crawl's own.
func HostPolicy(rs *rules.RuleSet) (frontier.HostPolicy, bool) {
	p := rs.Politeness
	if !p.Overrides() {
		return frontier.HostPolicy{}, false
	}
	hp := frontier.HostPolicy{Jitter: -1}
	if p.Delay != nil {
		hp.Delay = *p.Delay
	}
	if p.Jitter != nil {
		hp.Jitter = *p.Jitter
	}
	if p.Concurrency != nil {
		hp.Concurrency = *p.Concurrency
	}
	return hp, true
}
