package masterd_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestShardedCrawl crawls the test site as a crawl of 4 shards on one
// Redis with a master and three slaves: every page fetched exactly once
// and recorded, politeness kept, and master status shows the shards.
func TestShardedCrawl(t *testing.T) {
	cfg := clusterConfig(t)
	cfg.Crawl.Shards = 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	site := startSite(t, 0)
	seed(t, cfg, site)
	for i := range 3 {
		startSlave(t, cfg, fmt.Sprintf("slave-%d", i+1))
	}
	runMaster(t, cfg)
	checkCrawl(t, cfg, site, nil)

	st, err := masterd.Status(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Shards) != 4 {
		t.Fatalf("status shards %+v, want 4", st.Shards)
	}
	// each shard fetched the pages of its hosts
	want := make([]int64, 4)
	for u, n := range site.Expected() {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		want[frontier.ShardOfHost(pu.Host, 4)] += int64(n)
	}
	var done int64
	for _, s := range st.Shards {
		if s.Done < want[s.Shard] {
			t.Errorf("shard %d: %d pages done, its hosts have %d", s.Shard, s.Done, want[s.Shard])
		}
		done += s.Done
	}
	if done != st.Done {
		t.Errorf("shards' done add up to %d, status says %d", done, st.Done)
	}
}
