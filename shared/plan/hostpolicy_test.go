package plan_test

import (
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/rules"
)

func TestHostPolicy(t *testing.T) {
	delay, jitter, conc := 2*time.Second, 0.5, 3
	for _, tc := range []struct {
		name string
		p    rules.Politeness
		want frontier.HostPolicy
		ok   bool
	}{
		{"unset", rules.Politeness{}, frontier.HostPolicy{}, false},
		{"delay only: the crawl's jitter", rules.Politeness{Delay: &delay}, frontier.HostPolicy{Delay: delay, Jitter: -1}, true},
		{"all", rules.Politeness{Delay: &delay, Jitter: &jitter, Concurrency: &conc},
			frontier.HostPolicy{Delay: delay, Jitter: jitter, Concurrency: conc}, true},
	} {
		got, ok := plan.HostPolicy(&rules.RuleSet{Politeness: tc.p})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Of = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
