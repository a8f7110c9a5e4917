package frontier

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Stream is a crawl's event stream as read by one consumer group.
type Stream struct {
	rdb   redis.UniversalClient
	key   string
	group string
}

// Entry is one event read from the stream.
type Entry struct {
	// ID identifies the event for good (the MySQL rows' event_id): its
	// stream entry's id with the sequence scaled to make room for the
	// events a script writes in one entry (eventID).
	ID string
	// StreamID is the stream entry holding it, what Ack takes; the events
	// of one entry share it.
	StreamID string
	Type     events.Type
	Data     []byte
}

// eventsPerEntry is the most events a script writes in one stream entry
// (flush_events in luaPrelude); eventIDScale > eventsPerEntry.
const (
	eventsPerEntry = 200
	eventIDScale   = 1000
)

// eventID names event i of the stream entry id ms-seq: ms-(seq·1000+i).
// It is still a stream-like id (two numbers), unique and in stream order,
// for every entry whether it holds one event or several.
func eventID(id string, i int) string {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return id
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n > (math.MaxUint64-eventIDScale)/eventIDScale {
		return id
	}
	return ms + "-" + strconv.FormatUint(n*eventIDScale+uint64(i), 10)
}

// Stream returns the crawl's event stream for a consumer group.
func (f *Redis) Stream(group string) *Stream {
	return &Stream{rdb: f.rdb, key: f.keys.Events, group: group}
}

// EnsureGroup creates the consumer group (and the stream) if missing. The
// group starts at the beginning so that events written before the master
// first ran are not lost.
func (s *Stream) EnsureGroup(ctx context.Context) error {
	err := s.rdb.XGroupCreateMkStream(ctx, s.key, s.group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return wrap("create consumer group", err)
	}
	return nil
}

// Read returns up to count entries for consumer. With pending it returns
// entries delivered before but never acknowledged (after a crash) without
// waiting; otherwise it waits up to block for new ones.
func (s *Stream) Read(ctx context.Context, consumer string, count int, block time.Duration, pending bool) ([]Entry, error) {
	id := ">"
	if pending {
		id, block = "0", -1
	}
	res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: s.group, Consumer: consumer,
		Streams: []string{s.key, id}, Count: int64(count), Block: block}).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, wrap("read events", err)
	}
	var out []Entry
	for _, st := range res {
		for _, m := range st.Messages {
			out = appendEntries(out, m.ID, m.Values)
		}
	}
	return out, nil
}

// appendEntries adds the events of one stream entry: the fields type and
// data, or t0, d0, t1, d1, ... for several. An entry with neither (never
// written by redcrawl) gives one event of empty type, which the sink drops
// as undecodable and acks.
func appendEntries(out []Entry, id string, v map[string]any) []Entry {
	if t, ok := v[events.FieldType].(string); ok {
		d, _ := v[events.FieldData].(string)
		return append(out, Entry{ID: eventID(id, 0), StreamID: id, Type: events.Type(t), Data: []byte(d)})
	}
	n := 0
	for i := 0; i < eventsPerEntry; i++ {
		t, ok := v["t"+strconv.Itoa(i)].(string)
		if !ok {
			break
		}
		d, _ := v["d"+strconv.Itoa(i)].(string)
		out = append(out, Entry{ID: eventID(id, i), StreamID: id, Type: events.Type(t), Data: []byte(d)})
		n++
	}
	if n == 0 {
		out = append(out, Entry{ID: eventID(id, 0), StreamID: id})
	}
	return out
}

// Ack acknowledges and deletes entries once their records are stored; ids
// are stream ids (Entry.StreamID), repeats allowed.
func (s *Stream) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	pipe.XAck(ctx, s.key, s.group, ids...)
	pipe.XDel(ctx, s.key, ids...)
	_, err := pipe.Exec(ctx)
	return wrap("ack events", err)
}

// Append adds an event to the stream.
func (s *Stream) Append(ctx context.Context, e Event) error {
	err := s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.key, Values: []any{events.FieldType, string(e.Type), events.FieldData, e.Data}}).Err()
	return wrap("append event", err)
}

// Len returns the number of entries not yet deleted.
func (s *Stream) Len(ctx context.Context) (int64, error) {
	n, err := s.rdb.XLen(ctx, s.key).Result()
	return n, wrap("event stream length", err)
}
