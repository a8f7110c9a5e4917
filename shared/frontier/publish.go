package frontier

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Publisher writes events that belong to no task (a slave's proxy state
// changes, for example) to the crawl's event stream, for the master's sink.
type Publisher interface {
	Publish(ctx context.Context, evs []Event) error
}

var _ Publisher = (*Redis)(nil)

// Publish implements Publisher: the events are appended to the stream in
// one pipelined round trip, in order: a slave's own stream
// (Options.Slave), else the crawl's.
func (r *Redis) Publish(ctx context.Context, evs []Event) error {
	return r.PublishAs(ctx, r.shards[0].opt.Slave, evs)
}

// PublishAs appends events to a slave's own stream (the crawl's for ""),
// as Publish does for this frontier's slave: the work API's master writes
// a slave's events where the slave would have, so the sink takes them
// for that slave's and checks them against it.
func (r *Redis) PublishAs(ctx context.Context, slave string, evs []Event) error {
	f := r.shards[0]
	if len(evs) == 0 {
		return nil
	}
	key := f.keys.Events
	if slave != "" {
		key = f.keys.SlaveEvents(slave)
	}
	pipe := f.rdb.Pipeline()
	for _, e := range evs {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key,
			Values: []any{events.FieldType, string(e.Type), events.FieldData, e.Data}})
	}
	_, err := pipe.Exec(ctx)
	return wrap("publish events", err)
}
