package masterd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// insertLog records every event id a set of sinks inserted, and how often.
type insertLog struct {
	mu    sync.Mutex
	times map[string]int
	want  int
	all   chan struct{} // closed once want distinct ids are in
	once  sync.Once
}

// add logs the events of batch, read from shard's streams, by shard and
// stream id (not the id stored, so that ids the store merges still count);
// it returns how many were inserted before.
func (l *insertLog) add(shard int, batch []events.Envelope) (before int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range batch {
		k := strconv.Itoa(shard) + " " + e.ID
		if l.times[k] > 0 {
			before++
		}
		l.times[k]++
	}
	if len(l.times) == l.want {
		l.once.Do(func() { close(l.all) })
	}
	return before
}

// recordingInserter inserts through the store, logs what it inserted and,
// for a sharded crawl, puts the shard's tag in each event id as the
// sharded event streams name their events ("<slave>~<k>/<ms>-<seq>",
// "~<k>/<ms>-<seq>"). After its kill-th insert commits it cancels its
// sink's context, so the sink dies between the commit and the ack, as a
// master killed there would.
type recordingInserter struct {
	next  inserter
	shard int // -1: not sharded
	log   *insertLog
	kill  int
	stop  context.CancelFunc

	mu          sync.Mutex
	inserts     int
	redelivered int   // events already inserted before (by any sink)
	sizes       []int // events per insert
}

func (r *recordingInserter) Insert(ctx context.Context, batch []events.Envelope) error {
	raw := batch
	if r.shard >= 0 {
		tagged := make([]events.Envelope, len(batch))
		for i, e := range batch {
			if tag, rest, ok := strings.Cut(e.ID, "/"); ok {
				e.ID = tag + "~" + strconv.Itoa(r.shard) + "/" + rest
			} else {
				e.ID = "~" + strconv.Itoa(r.shard) + "/" + e.ID
			}
			tagged[i] = e
		}
		batch = tagged
	}
	if err := r.next.Insert(ctx, batch); err != nil {
		return err
	}
	before := r.log.add(r.shard, raw)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inserts++
	r.redelivered += before
	r.sizes = append(r.sizes, len(batch))
	if r.inserts == r.kill {
		r.stop()
	}
	return nil
}

// TestSinksStoreEachEventOnce runs several sinks over a backlog, as
// several masters (consumers of one group) and as the masters of several
// shards (streams whose ids collide), kills one sink between a commit and
// its ack and restarts it under the same consumer name: every event must
// be exactly one row.
func TestSinksStoreEachEventOnce(t *testing.T) {
	type sinkSpec struct {
		shard    int
		consumer string
		kill     int // die after this insert commits (0: never)
	}
	for _, tc := range []struct {
		name   string
		shards int
		sinks  []sinkSpec
	}{
		{"three masters, one stream", 1, []sinkSpec{{0, "master-b", 2}, {0, "master-a", 0}, {0, "master-c", 0}}},
		{"two shards, a sink each", 2, []sinkSpec{{1, "master-a", 3}, {0, "master-a", 0}}},
		{"two shards, two masters each", 2, []sinkSpec{{0, "master-a", 2}, {1, "master-b", 2}, {0, "master-b", 0}, {1, "master-a", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			const perShard, perEntry, batch = 1500, 7, 50
			fixtures := []*sinkFixture{newSinkFixture(t, "sinkonce")}
			for range tc.shards - 1 {
				f := newSinkFixtureStore(t, "sinkonce", fixtures[0].store)
				f.pageCrawl = fixtures[0].crawl
				fixtures = append(fixtures, f)
			}
			// the pools' idle connections outlive the test; no sink's
			// goroutine may
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
				goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
				goleak.IgnoreAnyFunction("database/sql.(*DB).connectionCleaner"),
				goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
			st := fixtures[0].store
			crawl := fixtures[0].crawl
			want := map[string]int{}
			for k, f := range fixtures {
				// the same entry ids in every shard's streams
				ids := func(j int) string { return fmt.Sprintf("1700000000000-%d", j+1) }
				if err := f.fillBacklog(ctx, []string{"s1", "s2"}, k*perShard, perShard, perEntry, ids); err != nil {
					t.Fatal(err)
				}
				if err := f.front.Stream("master").EnsureGroup(ctx); err != nil {
					t.Fatal(err)
				}
				for i := range perShard {
					want[benchPage(crawl, "", k*perShard+i).URL] = 1
				}
			}
			log := &insertLog{times: map[string]int{}, want: len(want), all: make(chan struct{})}
			var wg sync.WaitGroup
			defer wg.Wait()
			runCtx, stopAll := context.WithCancel(ctx)
			defer stopAll()
			start := func(sp sinkSpec, kill int) (*recordingInserter, context.Context) {
				sctx, stop := context.WithCancel(runCtx)
				shard := sp.shard
				if tc.shards == 1 {
					shard = -1
				}
				rec := &recordingInserter{next: st, shard: shard, log: log, kill: kill, stop: stop}
				s := fixtures[sp.shard].newSink(sp.consumer, batch)
				s.store = rec
				wg.Add(1)
				go func() { defer wg.Done(); defer stop(); s.run(sctx) }()
				return rec, sctx
			}

			// the sinks that will die run first, alone, so each surely
			// gets that far; each dies holding entries it never acked
			var restart []sinkSpec
			for _, sp := range tc.sinks {
				if sp.kill == 0 {
					continue
				}
				rec, sctx := start(sp, sp.kill)
				select {
				case <-sctx.Done():
				case <-ctx.Done():
					t.Fatal("test deadline before the sink's kill")
				}
				rec.mu.Lock()
				n := rec.inserts
				rec.mu.Unlock()
				if n != sp.kill {
					t.Fatalf("%s on shard %d: %d inserts before its kill, want %d", sp.consumer, sp.shard, n, sp.kill)
				}
				restart = append(restart, sp)
			}
			wg.Wait()
			for _, sp := range restart {
				f := fixtures[sp.shard]
				pending := 0
				for _, sl := range []string{"s1", "s2"} {
					p, err := f.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: f.front.Keys().SlaveEvents(sl),
						Group: "master", Start: "-", End: "+", Count: 10000, Consumer: sp.consumer}).Result()
					if err != nil {
						t.Fatal(err)
					}
					pending += len(p)
				}
				if pending == 0 {
					t.Fatalf("%s on shard %d died holding no unacknowledged entries", sp.consumer, sp.shard)
				}
			}

			// the others, with the dead ones restarted under their names
			var restarted []*recordingInserter
			for _, sp := range tc.sinks {
				rec, _ := start(sp, 0)
				if sp.kill > 0 {
					restarted = append(restarted, rec)
				}
			}
			select {
			case <-log.all:
			case <-ctx.Done():
				t.Fatalf("test deadline with %d of %d events inserted", len(log.times), len(want))
			}
			stopAll()
			wg.Wait()
			// what the last batches left unacknowledged is stored again
			// and acknowledged by its consumer; then every stream is empty
			for _, sp := range tc.sinks {
				s := fixtures[sp.shard].newSink(sp.consumer, batch)
				shard := sp.shard
				if tc.shards == 1 {
					shard = -1
				}
				s.store = &recordingInserter{next: st, shard: shard, log: log}
				for _, pending := range []bool{true, false} {
					for range 1000 {
						n, err := s.once(ctx, pending, -1, s.readCount())
						if err != nil {
							t.Fatalf("drain %s on shard %d: %v", sp.consumer, sp.shard, err)
						}
						if n == 0 {
							break
						}
					}
				}
			}
			for k, f := range fixtures {
				if n, err := f.front.Stream("master").Len(ctx); err != nil || n != 0 {
					t.Fatalf("shard %d: %d entries left in the streams (%v)", k, n, err)
				}
			}

			for _, rec := range restarted {
				rec.mu.Lock()
				n := rec.redelivered
				rec.mu.Unlock()
				if n == 0 {
					t.Errorf("a restarted sink inserted nothing it had inserted before its kill: the kill did not land between commit and ack")
				}
			}
			got, err := st.PageURLs(ctx, crawl)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("page rows by url (-want +got):\n%s", d)
			}
			rows, ids, err := countRows(ctx, st, crawl)
			if err != nil {
				t.Fatal(err)
			}
			if rows != len(want) || ids != len(want) {
				t.Errorf("pages: %d rows, %d distinct event ids; want %d", rows, ids, len(want))
			}
		})
	}
}

// TestSinkTransactions checks that a transaction holds at most the sink's
// batch of events, in whole stream entries (an entry larger than the batch
// alone), and that an undecodable event is dropped and its entry
// acknowledged with the rest.
func TestSinkTransactions(t *testing.T) {
	ctx := t.Context()
	f := newSinkFixture(t, "sinktx")
	keys := f.front.Keys()
	if err := f.rdb.ZAdd(ctx, keys.Slaves, redis.Z{Score: 1, Member: "s1"}).Err(); err != nil {
		t.Fatal(err)
	}
	// events per entry; the fourth entry's second event is not JSON
	sizes := []int{3, 3, 3, 10, 1, 1}
	want := map[string]int{}
	i := 0
	for e, n := range sizes {
		var vals []any
		for k := range n {
			ev, err := frontier.NewEvent(benchPage(f.crawl, "s1", i))
			if err != nil {
				t.Fatal(err)
			}
			data := string(ev.Data)
			if e == 3 && k == 1 {
				data = "{not json"
			} else {
				want[benchPage(f.crawl, "s1", i).URL] = 1
			}
			vals = append(vals, "t"+strconv.Itoa(k), string(ev.Type), "d"+strconv.Itoa(k), data)
			i++
		}
		if n == 1 {
			vals = []any{events.FieldType, vals[1], events.FieldData, vals[3]}
		}
		if err := f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.SlaveEvents("s1"), Values: vals}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := f.newSink("master-a", 5)
	if err := s.stream.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	rec := &recordingInserter{next: f.store, shard: -1, log: &insertLog{times: map[string]int{}, all: make(chan struct{})}}
	s.store = rec
	// the first read takes 5 entries (events per entry unknown yet), the
	// next one entry (20 events in 5 entries: 4 an entry)
	var reads []int
	for range 10 {
		n, err := s.once(ctx, false, -1, s.readCount())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		reads = append(reads, n)
	}
	if d := cmp.Diff([]int{5, 1}, reads); d != "" {
		t.Errorf("entries per read (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{3, 3, 3, 9, 1, 1}, rec.sizes); d != "" {
		t.Errorf("events per transaction (-want +got):\n%s", d)
	}
	got, err := f.store.PageURLs(ctx, f.crawl)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("page rows by url (-want +got):\n%s", d)
	}
	if n, err := s.stream.Len(ctx); err != nil || n != 0 {
		t.Errorf("%d entries left in the stream (%v)", n, err)
	}
}
