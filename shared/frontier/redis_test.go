package frontier_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
	"github.com/redcrawl/redcrawl/shared/testutil"
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
func uniqueCrawl(t testing.TB, rdb *redis.Client, name string) string {
	crawl := testutil.CrawlName("t-" + name)
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	return crawl
}

func TestRedisFrontier(t *testing.T) {
	rdb := testRedis(t)
	frontiertest.Run(t, func(t *testing.T, opt frontier.Options) (frontiertest.Backend, func() []events.Envelope) {
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
					ids = append(ids, e.ID)
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
