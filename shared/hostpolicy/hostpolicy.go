// Package hostpolicy turns a rule set's politeness into the frontier's
// per-host policy. Both sides need it: the master sends it with seeds and
// recrawls, a slave with the links it found; so it lives here rather than
// in either binary (rules cannot hold it: the frontier imports config,
// which imports rules).
package hostpolicy

import (
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// Of is a rule set's politeness for its hosts, if it sets any (for the
// frontier, with links or seeds). A jitter the rule set leaves unset is
// -1: the crawl's own.
func Of(rs *rules.RuleSet) (frontier.HostPolicy, bool) {
	p := rs.Politeness
	if p.Delay == nil && p.Jitter == nil && p.Concurrency == nil {
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
