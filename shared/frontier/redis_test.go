package frontier_test

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// testRedis connects to the machine's Redis (REDCRAWL_TEST_REDIS overrides).
func testRedis(t testing.TB) *redis.Client {
	t.Helper()
	u := os.Getenv("REDCRAWL_TEST_REDIS")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", u, err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// uniqueCrawl returns a crawl name no other test uses and deletes its keys
// afterwards.
func uniqueCrawl(t testing.TB, rdb redis.UniversalClient, name string) string {
	crawl := testutil.CrawlName("t-" + name)
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	return crawl
}

func TestRedisFrontier(t *testing.T) { testRedisFrontier(t, testRedis(t), 1) }

// TestRedisFrontierSharded runs the shared suite on crawls of 4 shards on
// one Redis: every behaviour holds whatever shard a host lands on.
func TestRedisFrontierSharded(t *testing.T) { testRedisFrontier(t, testRedis(t), 4) }

// TestClusterFrontier runs the shared suite on a 3-master Redis Cluster,
// with crawls of 1 and of 4 shards (a crawl's shards on several nodes).
func TestClusterFrontier(t *testing.T) {
	rdb := testCluster(t)
	for _, shards := range []int{1, 4} {
		t.Run(strconv.Itoa(shards)+" shards", func(t *testing.T) { testRedisFrontier(t, rdb, shards) })
	}
}

// testCluster starts a 3-master Redis Cluster for the test and returns a
// client of it.
func testCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	rc := testutil.StartCluster(t, 3, 0)
	opt, err := redis.ParseClusterURL(rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func testRedisFrontier(t *testing.T, rdb redis.UniversalClient, shards int) {
	frontiertest.Run(t, func(t *testing.T, opt frontier.Options) (frontiertest.Backend, func() []events.Envelope) {
		opt.Shards = shards
		opt.Crawl = uniqueCrawl(t, rdb, opt.Crawl)
		f, err := frontier.NewRedis(context.Background(), rdb, opt)
		if err != nil {
			t.Fatal(err)
		}
		st := f.Stream("test")
		if err := st.EnsureGroup(context.Background()); err != nil {
			t.Fatal(err)
		}
		drain := func() []events.Envelope {
			var out []events.Envelope
			for range 100 {
				es, err := st.Read(context.Background(), "c", 1000, -1, false)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) == 0 {
					return out
				}
				var ids []string
				for _, e := range es {
					env, err := events.Decode(e.ID, e.Type, e.Data)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, env)
					ids = append(ids, e.StreamID)
				}
				if err := st.Ack(context.Background(), ids...); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		return f, drain
	})
}

func TestDeleteCrawl(t *testing.T) {
	ctx := context.Background()
	rdb := testRedis(t)
	crawl := testutil.CrawlName("del")
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, ExpectedURLs: 1000, HostConcurrency: 1, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://a.test/")
	if _, err := f.Seed(ctx, []frontier.Task{frontier.NewTask(u, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	other := testutil.CrawlName("keep")
	if err := rdb.Set(ctx, frontier.NewKeys(other).Meta, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Del(ctx, frontier.NewKeys(other).Meta)
	if err := frontier.DeleteCrawl(ctx, rdb, crawl); err != nil {
		t.Fatal(err)
	}
	if keys, _ := rdb.Keys(ctx, frontier.NewKeys(crawl).Prefix+"*").Result(); len(keys) != 0 {
		t.Errorf("keys left: %v", keys)
	}
	if n, _ := rdb.Exists(ctx, frontier.NewKeys(other).Meta).Result(); n != 1 {
		t.Error("another crawl's key was deleted")
	}
}
