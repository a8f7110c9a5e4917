package frontier_test

import (
	"context"
	"testing"

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
