package masterd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// xaddEvents writes recs to the stream key as one entry of id ("": one
// Redis gives, as the scripts ask), as the scripts write them: the fields
// type and data for one event, t0, d0, t1, d1, ... for several. It returns
// the entry's id.
func xaddEvents(ctx context.Context, rdb redis.UniversalClient, key, id string, recs ...any) (string, error) {
	var vals []any
	for i, r := range recs {
		ev, err := frontier.NewEvent(r)
		if err != nil {
			return "", err
		}
		vals = append(vals, "t"+strconv.Itoa(i), string(ev.Type), "d"+strconv.Itoa(i), string(ev.Data))
	}
	if len(recs) == 1 {
		vals = []any{events.FieldType, vals[1], events.FieldData, vals[3]}
	}
	return rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: id, Values: vals}).Result()
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSinkRefusesForgedEvents has a slave write, to its own streams of a
// crawl of two shards, honest events beside forged ones: another crawl's
// item, another slave's item and heartbeat, a page in an entry whose id
// the slave chose in 2100. The honest ones are stored (those that leave
// crawl and slave empty are filled from the stream; an item and a page
// dated in 2100, as by a clock far ahead, dated when Redis wrote their
// entries); each forged one is not, and leaves
// one forged_event exception recorded for the stream's crawl and slave,
// a count in redcrawl_forged_events_total and a log line naming the
// slave; the other crawl's item is unchanged. The crawl's own stream is
// the master's: its events may name any slave.
func TestSinkRefusesForgedEvents(t *testing.T) {
	ctx := t.Context()
	rdb := testRedisClient(t)
	crawl, other := testutil.CrawlName("forged"), testutil.CrawlName("victim")
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	front, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	now := time.Now().Truncate(time.Millisecond)
	ms := now.UnixMilli()
	in2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	// the other crawl's real item, fetched an hour ago by its slave o1
	victim := &events.Item{Crawl: other, Rule: "news", Item: "article", URL: "https://a.example/1",
		Data: json.RawMessage(`{"title":"real"}`), Slave: "o1", FetchedAt: ms - time.Hour.Milliseconds()}
	if err := st.Insert(ctx, []events.Envelope{{ID: "o1/1700000000000-0", Type: events.TypeItem, Item: victim}}); err != nil {
		t.Fatal(err)
	}
	before, err := st.Counts(ctx, other)
	if err != nil {
		t.Fatal(err)
	}

	item := func(crawl, slave, url string, at int64) *events.Item {
		return &events.Item{Crawl: crawl, Rule: "news", Item: "article", URL: url,
			Data: json.RawMessage(`{"by":"` + slave + `"}`), Slave: slave, FetchedAt: at}
	}
	page := func(crawl, slave, url string, at int64) *events.Page {
		return &events.Page{Crawl: crawl, URL: url, FinalURL: url, Status: 200, Slave: slave, FetchedAt: at}
	}
	k0, k1 := frontier.ShardKeys(crawl, 0), frontier.ShardKeys(crawl, 1)
	for _, k := range []frontier.Keys{k0, k1} {
		if err := rdb.ZAdd(ctx, k.Slaves, redis.Z{Score: float64(ms), Member: "pi1"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	writes := []struct {
		key, id string // id "": Redis's
		recs    []any
	}{
		// honest: its own crawl and name; empty ones; a clock 4 minutes fast
		{k0.SlaveEvents("pi1"), "", []any{page(crawl, "pi1", "https://h.example/1", ms)}},
		{k0.SlaveEvents("pi1"), "", []any{item(crawl, "pi1", "https://h.example/1", ms)}},
		{k0.SlaveEvents("pi1"), "", []any{&events.Exception{Kind: events.KindTimeout, URL: "https://h.example/2", At: ms}}},
		{k1.SlaveEvents("pi1"), "", []any{page(crawl, "pi1", "https://h.example/3", ms+(4*time.Minute).Milliseconds())}},
		// forged: another crawl, another slave; one entry of several
		// events, honest and forged; honest, dated in 2100 (by a clock
		// far ahead)
		{k0.SlaveEvents("pi1"), "", []any{item(other, "o1", victim.URL, in2100)}},
		{k0.SlaveEvents("pi1"), "", []any{item(crawl, "o1", "https://h.example/4", ms)}},
		{k0.SlaveEvents("pi1"), "", []any{
			page(crawl, "pi1", "https://h.example/5", ms),
			item(crawl, "pi1", "https://h.example/1", in2100),
			&events.Heartbeat{Crawl: crawl, Slave: "o1", At: ms, Pages: 1},
			&events.Duplicate{Crawl: crawl, URL: "https://h.example/6", FirstURL: "https://h.example/5", Slave: "pi1", At: ms},
		}},
		{k1.SlaveEvents("pi1"), "", []any{page(crawl, "pi1", "https://h.example/7", in2100)}},
		{k1.SlaveEvents("pi1"), "", []any{page(strings.Repeat("x", 5000), "pi1", "https://h.example/8", ms)}},
		// forged: the slave's own XADD, its entry id in 2100 (the last of
		// its stream: Redis gives no id before it any more)
		{k1.SlaveEvents("pi1"), strconv.FormatInt(in2100, 10) + "-0", []any{page(crawl, "pi1", "https://h.example/11", in2100)}},
		// the crawl's own stream: the master's scripts name other slaves
		{k1.Events, "", []any{&events.Lost{Crawl: crawl, URL: "https://h.example/9", Slave: "o1", DetectedAt: ms, Reason: events.LostExpired}}},
		{k0.Events, "", []any{&events.Lost{Crawl: other, URL: "https://h.example/10", Slave: "o1", DetectedAt: ms, Reason: events.LostExpired}}},
	}
	var ids []string
	for _, w := range writes {
		id, err := xaddEvents(ctx, rdb, w.key, w.id, w.recs...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// the time Redis wrote entry i
	written := func(i int) int64 {
		ms, _, _ := strings.Cut(ids[i], "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	met := metrics.NewMaster(crawl, nil)
	s := &sink{stream: front.Stream("master"), crawl: crawl, store: st, batch: 3, consumer: "master-a",
		log: log, rl: ratelog.New(log, time.Minute), now: func() time.Time { return now }, forged: met.ForgedEvent}
	if err := s.stream.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		n, err := s.once(ctx, false, -1, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n, err := s.stream.Len(ctx); err != nil || n != 0 {
		t.Errorf("%d entries left in the streams (%v): forged ones must be acknowledged too", n, err)
	}

	// the honest rows
	pages, err := st.PageURLs(ctx, crawl)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]int{"https://h.example/1": 1, "https://h.example/3": 1, "https://h.example/5": 1,
		"https://h.example/7": 1}, pages); d != "" {
		t.Errorf("page rows (-want +got):\n%s", d)
	}
	type itemView struct {
		Crawl, URL, Slave string
		FetchedAt         int64
		Data              string
	}
	items := func(crawl string) []itemView {
		var out []itemView
		err := st.ExportItems(ctx, store.ItemFilter{Crawl: crawl}, func(r store.ItemRow) error {
			out = append(out, itemView{r.Crawl, r.URL, r.Slave, r.FetchedAt.UnixMilli(), string(r.Data)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// the later of its two fetches: the one dated in 2100, as its entry
	if d := cmp.Diff([]itemView{{crawl, "https://h.example/1", "pi1", written(6), `{"by":"pi1"}`}}, items(crawl)); d != "" {
		t.Errorf("items (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]itemView{{other, victim.URL, "o1", victim.FetchedAt, `{"title":"real"}`}}, items(other)); d != "" {
		t.Errorf("the other crawl's item (-want +got):\n%s", d)
	}
	after, err := st.Counts(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("the other crawl's rows changed (-before +after):\n%s", d)
	}
	lost, err := st.LostTasks(ctx, crawl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0].Slave != "o1" {
		t.Errorf("lost tasks %+v, want the master's record for o1", lost)
	}
	dups, err := st.Duplicates(ctx, crawl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dups) != 1 {
		t.Errorf("duplicates %+v, want the honest one", dups)
	}
	counts, err := st.Counts(ctx, crawl)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Heartbeats != 0 {
		t.Errorf("%d heartbeat rows, want none: the only one named another slave", counts.Heartbeats)
	}

	// one exception for each forged event, for this crawl and the slave
	// whose stream it came from; the honest one filled in
	exc, err := st.Exceptions(ctx, store.ExceptionFilter{Crawl: crawl})
	if err != nil {
		t.Fatal(err)
	}
	type excView struct{ Kind, Slave, Why string }
	var got []excView
	for _, x := range exc {
		// the message names the event by id (random); keep the rest
		typ, _, _ := strings.Cut(x.Message, " ")
		_, why, _ := strings.Cut(x.Message, " not stored: ")
		if x.Kind != events.KindForgedEvent {
			typ, why = "", x.URL
		}
		got = append(got, excView{x.Kind, x.Slave, typ + ": " + why})
	}
	q := strconv.Quote
	want := []excView{
		{events.KindTimeout, "pi1", ": https://h.example/2"},
		{events.KindForgedEvent, "pi1", "item: crawl " + q(other) + " is not the stream's " + q(crawl)},
		{events.KindForgedEvent, "pi1", `item: slave "o1" is not the stream's "pi1"`},
		{events.KindForgedEvent, "pi1", `heartbeat: slave "o1" is not the stream's "pi1"`},
		{events.KindForgedEvent, "pi1", "page: fetched_at " + strconv.FormatInt(in2100, 10) + " is " +
			strconv.FormatInt((in2100-ms)/time.Hour.Milliseconds(), 10) + "h ahead of the master's clock (at most 5m0s)"},
		{events.KindForgedEvent, "pi1", "page: crawl " + q(strings.Repeat("x", 64)) + "… (5000 bytes) is not the stream's " + q(crawl)},
		{events.KindForgedEvent, "o1", "lost: crawl " + q(other) + " is not the stream's " + q(crawl)},
	}
	sortExc := func(v []excView) {
		slices.SortFunc(v, func(a, b excView) int { return strings.Compare(a.Kind+a.Slave+a.Why, b.Kind+b.Slave+b.Why) })
	}
	sortExc(got)
	sortExc(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("exceptions (-want +got):\n%s", d)
	}
	for _, x := range exc {
		if x.Crawl != crawl || !utf8.ValidString(x.Message) || len(x.Message) > 400 {
			t.Errorf("exception %+v: want crawl %s and a short valid message", x, crawl)
		}
	}

	// counted by slave and field; logged naming the slave
	fams, err := met.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "redcrawl_forged_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			counted[l["slave"]+" "+l["field"]] += m.GetCounter().GetValue()
		}
	}
	if d := cmp.Diff(map[string]float64{"pi1 crawl": 2, "pi1 slave": 2, "pi1 fetched_at": 1, "o1 crawl": 1}, counted); d != "" {
		t.Errorf("redcrawl_forged_events_total (-want +got):\n%s", d)
	}
	if l := logs.String(); !strings.Contains(l, "forged event not stored") || !strings.Contains(l, "slave=pi1") {
		t.Errorf("no log line naming the slave:\n%s", l)
	}
}
