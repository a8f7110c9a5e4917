package slaved

import (
	"context"
	"net/url"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// The rule set in force is swapped atomically (s.ruleSet). The master
// publishes each valid version to Redis; the slave loads it at start,
// switches when the master's pub/sub message arrives, and, since a message
// can be missed (a disconnect), also whenever a claim reports another
// version. A version the slave cannot load (it names a proxy pool this
// slave's config lacks, say) is logged and the previous one stays.

// ruleFor returns the rule set of a URL, or nil.
func (s *Slave) ruleFor(u *url.URL) *rules.RuleSet {
	set := s.ruleSet.Load()
	if set == nil {
		return nil
	}
	return set.Match(u)
}

// rulesVersion is the version in force, "" when none.
func (s *Slave) rulesVersion() string {
	if set := s.ruleSet.Load(); set != nil {
		return set.Version
	}
	return ""
}

// rulesSeen is told the version a claim saw; a different one triggers a
// reload.
func (s *Slave) rulesSeen(version string) {
	if version == s.rulesVersion() || version == s.rulesRejected.Load() {
		return
	}
	signal(s.rulesReload)
}

// loadRules loads the published rule set if it differs from the one in
// force.
func (s *Slave) loadRules(ctx context.Context) error {
	version, blob, ok, err := s.front.GetRules(ctx)
	if err != nil || !ok || version == s.rulesVersion() {
		return err
	}
	set, err := rules.Unmarshal(blob, rules.LoadOptions{ProxyPools: s.cfg.ProxyPoolNames()})
	if err != nil {
		s.rulesRejected.Store(version)
		s.log.Error("cannot load the published rules; keeping the previous version",
			"version", version, "in_force", s.rulesVersion(), "err", err)
		return nil
	}
	s.ruleSet.Store(set)
	s.log.Info("rules in force", "version", version, "rule_sets", len(set.Sets))
	return nil
}

// rulesLoop follows the published rule set until ctx ends.
func (s *Slave) rulesLoop(ctx context.Context) {
	var msgs <-chan string
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	fail := 0
	retryAt := time.Time{}
	for ctx.Err() == nil {
		if msgs == nil && time.Now().After(retryAt) {
			ch, st, err := s.front.SubscribeRules(ctx)
			if err != nil {
				fail++
				s.rl.Log(ctx, levelWarn, "rules-subscribe", "subscribe to rule changes; claims still check the version", "err", err)
				retryAt = time.Now().Add(retry.Backoff(fail))
			} else {
				msgs, stop, fail = ch, st, 0
				// catch up with what was published before the subscription
				if err := s.loadRules(ctx); err != nil {
					s.rl.Log(ctx, levelWarn, "rules-load", "load rules", "err", err)
				}
			}
		}
		var tick <-chan time.Time
		if msgs == nil {
			tick = time.After(time.Until(retryAt) + time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case v, ok := <-msgs:
			if !ok {
				msgs, stop = nil, nil
				continue
			}
			if v == frontier.WorkMessage {
				// tasks were queued from outside: an idle claim loop looks
				// now, at every shard (wait)
				signal(s.wake)
				continue
			}
			if v == s.rulesVersion() {
				continue
			}
		case <-s.rulesReload:
		case <-tick:
			continue
		}
		if err := s.loadRules(ctx); err != nil {
			s.rl.Log(ctx, levelWarn, "rules-load", "load rules", "err", err)
		}
	}
}
