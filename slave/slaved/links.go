package slaved

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// What becomes of the links a page has: planned without the frontier
// (planLinks, planLink: traps, the crawl's and the rule sets' scopes), then
// added to the page's completion (addLinks, linkTask), and noted for Parse.

// Link verdicts (LinkVerdict.Verdict).
const (
	// LinkFollow: in scope, offered to the frontier (which drops a URL it
	// has seen).
	LinkFollow = "follow"
	// LinkOutOfScope: the crawl's scope or its rule set's refuses it.
	LinkOutOfScope = "out_of_scope"
	// LinkTrap: a trap filter refuses it (crawl.max_url_length,
	// crawl.max_path_repeats, ...).
	LinkTrap = "trap"
	// LinkNoFollow: the page says nofollow (robots meta tag, X-Robots-Tag),
	// so none of its links is followed.
	LinkNoFollow = "nofollow"
	// LinkSkipped: an OnResponse hook called Page.SkipLinks.
	LinkSkipped = "skipped"
)

// LinkVerdict is what became of one URL a page leads to: a link, an
// ancestor directory (crawl.upward_paths), its canonical URL or its
// redirect's target.
type LinkVerdict struct {
	URL     string `json:"url"`
	Verdict string `json:"verdict"`
	// Reason says why a link is not followed; for a followed one, what it
	// is when not a link ("redirect", "canonical", "upward path").
	Reason string `json:"reason,omitempty"`
	// Render is set for a followed link a render rule covers: it waits
	// for a render-capable slave.
	Render bool `json:"render,omitempty"`
}

// plannedLink is a URL planLinks follows: its task and its host's policy
// from its rule set (nil: none).
type plannedLink struct {
	task   frontier.Task
	policy *frontier.HostPolicy
}

// planLink plans one URL found at depth after hops redirects (plan.Planner:
// the crawl's scope, the rule set's scope, render and politeness, the
// strategy's priority): its task when it is followed, and its verdict.
func (s *Slave) planLink(u *url.URL, depth, hops int) (plannedLink, LinkVerdict, bool) {
	t, policy, why, ok := s.plan.Task(u, depth, hops, s.ruleFor(u))
	if !ok {
		return plannedLink{}, LinkVerdict{URL: u.String(), Verdict: LinkOutOfScope, Reason: why}, false
	}
	return plannedLink{task: t, policy: policy}, LinkVerdict{URL: u.String(), Verdict: LinkFollow, Render: t.Render}, true
}

// planLinks plans the links of a page at depth (and, with
// crawl.upward_paths, their ancestor directories): trap filters first,
// then planLink. It returns the links followed, in order, and the
// verdict of every URL considered.
func (s *Slave) planLinks(links []*url.URL, depth int) ([]plannedLink, []LinkVerdict) {
	var follow []plannedLink
	verdicts := make([]LinkVerdict, 0, len(links))
	add := func(lu *url.URL, what string) {
		if ok, why := s.traps.Check(lu); !ok {
			verdicts = append(verdicts, LinkVerdict{URL: lu.String(), Verdict: LinkTrap, Reason: why})
			return
		}
		pl, v, ok := s.planLink(lu, depth, 0)
		if ok {
			follow = append(follow, pl)
			v.Reason = what
		}
		verdicts = append(verdicts, v)
	}
	var seen map[string]struct{}
	for _, lu := range links {
		add(lu, "")
		if !s.cfg.Crawl.UpwardPaths {
			continue
		}
		if seen == nil {
			seen = make(map[string]struct{}, len(links))
			for _, x := range links {
				seen[x.String()] = struct{}{}
			}
		}
		for _, up := range urlx.UpwardPaths(lu) {
			if _, dup := seen[up.String()]; !dup {
				seen[up.String()] = struct{}{}
				add(up, "upward path")
			}
		}
	}
	return follow, verdicts
}

// addLinks plans the links of a page (planLinks) and adds those followed
// to its completion, with their hosts' policies; the URLs dropped as traps
// are reported in one exception per page. what says what the links are
// when not the page's links ("canonical"), for Parse.
func (s *Slave) addLinks(c *frontier.Completion, links []*url.URL, depth int, what string) {
	follow, verdicts := s.planLinks(links, depth)
	var hosts []string
	// the links' hosts, for the look-ahead resolution (off by default)
	lookAhead := s.dns != nil && s.cfg.DNS.PrefetchLinks
	for _, pl := range follow {
		s.addTask(c, pl)
		if h := pl.task.ScopeHost; lookAhead && (len(hosts) == 0 || hosts[len(hosts)-1] != h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) > 0 {
		// a link's host may be crawled by another slave (with N slaves this
		// one fetches ~1/N of them), or already: its resolution must not
		// evict the hosts this slave fetches. Off by default: the claim-time
		// pre-resolution (claim.go) covers every fetch.
		s.dns.PrefetchIfRoom(hosts)
	}
	trapped := map[string]int{}
	for i, v := range verdicts {
		if v.Verdict == LinkTrap {
			trapped[v.Reason]++
		} else if what != "" && v.Reason == "" {
			verdicts[i].Reason = what
		}
	}
	s.noteLinks(verdicts...)
	if len(trapped) > 0 {
		reasons := make([]string, 0, len(trapped))
		n := 0
		for why, k := range trapped {
			reasons = append(reasons, fmt.Sprintf("%s %d", why, k))
			n += k
		}
		sort.Strings(reasons)
		s.exception(c, events.KindTrap, 0, fmt.Sprintf("%d links dropped as traps: %s", n, strings.Join(reasons, ", ")))
	}
}

// addTask adds a planned link's task to a completion, and its host's
// policy.
func (s *Slave) addTask(c *frontier.Completion, pl plannedLink) {
	c.Links = append(c.Links, pl.task)
	addPolicy(c, pl)
}

// addPolicy adds a planned link's host policy (if any) to a completion.
func addPolicy(c *frontier.Completion, pl plannedLink) {
	if pl.policy != nil {
		if c.Policies == nil {
			c.Policies = map[string]frontier.HostPolicy{}
		}
		c.Policies[pl.task.Host] = *pl.policy
	}
}

// maxLinksPerPage bounds what one page can add to the frontier.
const maxLinksPerPage = 5000

// linkTask scopes and builds a task for a discovered URL (planLink),
// adding its host's policy to the completion.
func (s *Slave) linkTask(c *frontier.Completion, u *url.URL, depth, hops int) (frontier.Task, bool) {
	pl, _, ok := s.planLink(u, depth, hops)
	if !ok {
		return frontier.Task{}, false
	}
	addPolicy(c, pl)
	return pl.task, true
}
