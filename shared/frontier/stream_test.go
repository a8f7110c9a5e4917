package frontier_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestEventID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		i    int
		want string
	}{
		{"1700000000000-0", 0, "1700000000000-0"},
		{"1700000000000-0", 7, "1700000000000-7"},
		{"1700000000000-3", 0, "1700000000000-3000"},
		{"1700000000000-3", 199, "1700000000000-3199"},
		{"1-18446744073709550", 5, "1-18446744073709550005"},
		// not a stream id, or too large to scale: kept as is
		{"junk", 1, "junk"},
		{"1-18446744073709551", 0, "1-18446744073709551"},
	} {
		if got := frontier.EventID(tc.id, tc.i); got != tc.want {
			t.Errorf("eventID(%q, %d) = %q, want %q", tc.id, tc.i, got, tc.want)
		}
	}
}

// TestStreamBatchedEntries: an entry holding several events (as scripts
// write them) reads as one Entry per event, in order, with distinct ids
// that sort in stream order, and acking its stream id removes it whole.
func TestStreamBatchedEntries(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "stream", nil)
	st := f.Stream("test")
	if err := st.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	key := f.Keys().Events
	single, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "5-1",
		Values: []any{events.FieldType, "page", events.FieldData, `{"url":"a"}`}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	batch, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "5-2",
		Values: []any{"t0", "page", "d0", `{"url":"b"}`, "t1", "exception", "d1", `{"url":"c"}`, "t2", "page", "d2", `{"url":"d"}`}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.Read(ctx, "c", 10, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ ID, StreamID, Type, Data string }
	var got []row
	for _, e := range es {
		got = append(got, row{e.ID, e.StreamID, string(e.Type), string(e.Data)})
	}
	want := []row{
		{"5-1000", single, "page", `{"url":"a"}`},
		{"5-2000", batch, "page", `{"url":"b"}`},
		{"5-2001", batch, "exception", `{"url":"c"}`},
		{"5-2002", batch, "page", `{"url":"d"}`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("entries (-want +got):\n%s", d)
	}
	if err := st.Ack(ctx, single, batch, batch); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Len(ctx); err != nil || n != 0 {
		t.Fatalf("stream length %d after ack (err %v), want 0", n, err)
	}
}

// TestSlaveStreams: a slave's events go to its own stream, read by the
// sink's group with the slave's name in their ids; a slave's stream
// deleted under the group is read again after the group is made anew;
// once a retired slave's stream is drained, it is deleted.
func TestSlaveStreams(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	master := newFrontier(t, rdb, "sstream", nil)
	opt := frontier.Options{Crawl: master.Keys().Prefix[len("crawl:{") : len(master.Keys().Prefix)-2], Slave: "s1",
		HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10000}
	s1, err := frontier.NewRedis(ctx, rdb, opt)
	if err != nil {
		t.Fatal(err)
	}
	st := master.Stream("sink")
	if err := st.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	k := master.Keys()
	if err := s1.Heartbeat(ctx, events.Heartbeat{Slave: "s1"}); err != nil {
		t.Fatal(err)
	}
	pub := func(url string) {
		ev, err := frontier.NewEvent(&events.Page{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		if err := s1.Publish(ctx, []frontier.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	pub("http://a.test/1")
	if n, _ := rdb.XLen(ctx, k.Events).Result(); n != 0 {
		t.Errorf("crawl stream holds %d entries; a slave's events go to its own", n)
	}
	read := func() (types []string, ids []string) {
		es, err := st.Read(ctx, "c", 100, -1, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			from := "crawl"
			if sl, _, ok := strings.Cut(e.ID, "/"); ok {
				from = sl
			}
			types = append(types, string(e.Type)+" "+from)
			ids = append(ids, e.StreamID)
		}
		return types, ids
	}
	types, ids := read()
	if d := cmp.Diff([]string{"slave s1", "page s1"}, types); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	if err := st.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.XLen(ctx, k.SlaveEvents("s1")).Result(); n != 0 {
		t.Fatalf("slave stream holds %d entries after ack", n)
	}
	// the stream deleted under the group (by its slave): made anew
	if err := rdb.Del(ctx, k.SlaveEvents("s1")).Err(); err != nil {
		t.Fatal(err)
	}
	pub("http://a.test/2")
	types, ids = read()
	if d := cmp.Diff([]string{"page s1"}, types); d != "" {
		t.Fatalf("events after the stream was deleted (-want +got):\n%s", d)
	}
	// a retired slave: its stream is read until drained, then deleted
	pub("http://a.test/3")
	if _, err := master.RecoverSlave(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	types, ids = read()
	// its death is the master's event, in the crawl's stream
	if d := cmp.Diff([]string{"slave crawl", "page s1"}, types); d != "" {
		t.Fatalf("events of the retired slave (-want +got):\n%s", d)
	}
	if err := st.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	read()
	if n, _ := rdb.Exists(ctx, k.SlaveEvents("s1")).Result(); n != 0 {
		t.Error("a retired slave's drained stream was not deleted")
	}
	if m, _ := rdb.SMembers(ctx, k.Streams).Result(); len(m) != 0 {
		t.Errorf("streams set after the drop: %v", m)
	}
}
