package frontier

import (
	"context"
	"errors"
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

// Entry is one raw stream entry.
type Entry struct {
	ID   string
	Type events.Type
	Data []byte
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
			out = append(out, entryOf(m.ID, m.Values))
		}
	}
	return out, nil
}

func entryOf(id string, v map[string]any) Entry {
	t, _ := v[events.FieldType].(string)
	d, _ := v[events.FieldData].(string)
	return Entry{ID: id, Type: events.Type(t), Data: []byte(d)}
}

// Ack acknowledges and deletes entries once their records are stored.
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
