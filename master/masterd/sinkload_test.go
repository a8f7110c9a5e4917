package masterd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// sinkFixture is one crawl's frontier on the test Redis and a migrated
// store in a fresh MySQL database, for driving the real sink.
type sinkFixture struct {
	crawl string
	// pageCrawl is the crawl the page events name (default crawl): shards
	// of one crawl are stand-in crawls here whose events name the same
	pageCrawl string
	rdb       *redis.Client
	front     *frontier.Redis
	store     *store.Store
}

func newSinkFixture(t testing.TB, prefix string) *sinkFixture {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newSinkFixtureStore(t, prefix, st)
}

// newSinkFixtureStore is newSinkFixture writing into st.
func newSinkFixtureStore(t testing.TB, prefix string, st *store.Store) *sinkFixture {
	t.Helper()
	ctx := context.Background()
	rdb := testRedisClient(t)
	crawl := testutil.CrawlName(prefix)
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	front, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl})
	if err != nil {
		t.Fatal(err)
	}
	return &sinkFixture{crawl: crawl, rdb: rdb, front: front, store: st}
}

// testRedisClient connects to the machine's Redis (REDCRAWL_TEST_REDIS
// overrides) until the test ends.
func testRedisClient(t testing.TB) *redis.Client {
	t.Helper()
	addr := "127.0.0.1:6379"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		addr = opt.Addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newSink builds the sink the way Master.Run does, reading the crawl's
// streams as consumer of the group "master".
func (f *sinkFixture) newSink(consumer string, batch int) *sink {
	log := slog.New(slog.NewTextHandler(ioDiscard{}, nil))
	crawl := f.crawl
	if f.pageCrawl != "" {
		crawl = f.pageCrawl
	}
	return &sink{stream: f.front.Stream("master"), crawl: crawl, store: f.store, batch: batch,
		consumer: consumer, log: log, rl: ratelog.New(log, 30*time.Second)}
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

// benchPage is page event i as a slave emits it: a ~70-byte URL, a
// 40-digit content hash, a WARC location and the rest of what the fetch
// pipeline fills in (about 560 bytes of JSON).
func benchPage(crawl, slave string, i int) *events.Page {
	u := fmt.Sprintf("https://www.host-%04d.example.com/section-%02d/article-%09d.html", i%5000, i%37, i)
	return &events.Page{
		Crawl: crawl, URL: u, FinalURL: u, Status: 200,
		ContentType: "text/html; charset=utf-8", Bytes: 15000 + int64(i%9000), Depth: 1 + i%6,
		FetchedAt: time.Now().UnixMilli(), Slave: slave,
		ContentHash: fmt.Sprintf("%040x", uint64(i)*0x9e3779b97f4a7c15),
		DurationMS:  int64(40 + i%300), Attempt: 1, Links: 20 + i%60,
		Charset: "utf-8", WARC: fmt.Sprintf("redcrawl-%s-20261123-%05d.warc.gz:%d", slave, i/20000, (i%20000)*9000),
		Proxy: "direct", Handler: "html", Checksum: fmt.Sprintf("%016x", uint64(i)*0xbf58476d1ce4e5b9),
	}
}

// fillBacklog writes n page events (numbered from first) into the event
// streams of the given slaves, which it registers, round robin by entry,
// perEntry events per entry (t0, d0, t1, d1, ... as the scripts write
// several), with pipelined XADDs. ids, when set, gives entry j of each
// stream an explicit id instead of "*" (to make two shards' ids collide).
func (f *sinkFixture) fillBacklog(ctx context.Context, slaves []string, first, n, perEntry int, ids func(j int) string) error {
	keys := f.front.Keys()
	now := float64(time.Now().UnixMilli())
	for _, s := range slaves {
		if err := f.rdb.ZAdd(ctx, keys.Slaves, redis.Z{Score: now, Member: s}).Err(); err != nil {
			return err
		}
	}
	pipe := f.rdb.Pipeline()
	entry := 0
	for i := 0; i < n; i += perEntry {
		slave := slaves[entry%len(slaves)]
		var vals []any
		for k := 0; k < perEntry && i+k < n; k++ {
			crawl := f.crawl
			if f.pageCrawl != "" {
				crawl = f.pageCrawl
			}
			ev, err := frontier.NewEvent(benchPage(crawl, slave, first+i+k))
			if err != nil {
				return err
			}
			vals = append(vals, "t"+strconv.Itoa(k), string(ev.Type), "d"+strconv.Itoa(k), ev.Data)
		}
		id := ""
		if ids != nil {
			id = ids(entry / len(slaves))
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: keys.SlaveEvents(slave), ID: id, Values: vals})
		entry++
		if pipe.Len() == 200 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("xadd: %w", err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && pipe.Len() > 0 {
		return fmt.Errorf("xadd: %w", err)
	}
	return nil
}

// countRows returns the crawl's page rows and distinct event ids.
func countRows(ctx context.Context, st *store.Store, crawl string) (rows, ids int, err error) {
	err = st.DB.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT event_id) FROM pages WHERE crawl = ?", crawl).Scan(&rows, &ids)
	return rows, ids, err
}

// mysqlStatus reads numeric SHOW GLOBAL STATUS variables.
func mysqlStatus(ctx context.Context, st *store.Store, names ...string) (map[string]int64, error) {
	rows, err := st.DB.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(names, "','")+"')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return out, rows.Err()
}
