package frontier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Stream is a crawl's events as read by one consumer group: the crawl's
// own stream (the master's scripts and Publish) and every slave's
// (Keys.SlaveEvents: what its scripts and its Publish write, the only
// stream its Redis user may write, so a slave can neither read nor trim
// another's events). The slave streams are found in the registry and the
// streams set; a retired slave's stream is read until it is empty, then
// deleted.
type Stream struct {
	rdb   redis.UniversalClient
	keys  Keys
	group string

	mu    sync.Mutex
	known map[string]bool // stream keys with the group created

	// tag marks the event ids of a shard k>0 of a sharded crawl ("~k");
	// parts, when set, are a sharded crawl's shards' streams, read in turn
	// (those owned() lists, when set: SetOwned)
	tag   string
	parts []*Stream
	owned func() []int
}

// SetOwned restricts reads to the shards owned returns (a master's share:
// Redis.Own); acks still go to whichever shard an id names.
func (s *Stream) SetOwned(owned func() []int) { s.owned = owned }

// readable returns the parts to read.
func (s *Stream) readable() []*Stream {
	if s.owned == nil {
		if s.parts == nil {
			return []*Stream{s}
		}
		return s.parts
	}
	var out []*Stream
	for _, k := range s.owned() {
		switch {
		case s.parts == nil && k == 0:
			out = append(out, s)
		case k < len(s.parts):
			out = append(out, s.parts[k])
		}
	}
	return out
}

// ClaimStale takes over entries delivered to another consumer (a master
// that died, or gave the shard up) and not acknowledged for minIdle, on
// the shards read; the caller then reads its pending entries. It returns
// how many it took.
func (s *Stream) ClaimStale(ctx context.Context, consumer string, minIdle time.Duration) (int, error) {
	n := 0
	for _, p := range s.readable() {
		keys, err := p.streams(ctx, false)
		if err != nil {
			return n, wrap("claim stale events", err)
		}
		for _, key := range keys {
			ids, _, err := p.rdb.XAutoClaimJustID(ctx, &redis.XAutoClaimArgs{Stream: key, Group: p.group,
				Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: 1000}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return n, wrap("claim stale events", err)
			}
			n += len(ids)
		}
	}
	return n, nil
}

// Entry is one event read from the stream.
type Entry struct {
	// ID identifies the event for good (the MySQL rows' event_id): its
	// stream entry's id with the sequence scaled to make room for the
	// events a script writes in one entry (eventID).
	ID string
	// StreamID is the stream entry holding it, what Ack takes; the events
	// of one entry share it. For a slave's stream it is slave/entry id.
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

// stream returns the shard's event streams for a consumer group.
func (f *shard) stream(group string) *Stream {
	return &Stream{rdb: f.rdb, keys: f.keys, group: group, known: map[string]bool{}, tag: f.tag}
}

// Stream returns the crawl's event streams for a consumer group: every
// shard's. Event ids of shard k>0 carry "~k" before the "/" (a slave's
// stream: "<slave>~k/"), so no two shards' ids meet in MySQL.
func (f *Redis) Stream(group string) *Stream {
	return f.StreamOf(group, nil)
}

// StreamOf is Stream over the shards given (nil: all), the ones a master
// owns.
func (f *Redis) StreamOf(group string, shards []int) *Stream {
	if len(f.shards) == 1 {
		return f.shards[0].stream(group)
	}
	if shards == nil {
		shards = f.all()
	}
	st := &Stream{group: group}
	for _, k := range shards {
		st.parts = append(st.parts, f.shards[k].stream(group))
	}
	return st
}

// EnsureGroup creates the consumer group (and the stream) if missing on
// the crawl's stream and every slave stream known. The group starts at the
// beginning so that events written before the master first ran are not
// lost.
func (s *Stream) EnsureGroup(ctx context.Context) error {
	for _, p := range s.parts {
		if err := p.EnsureGroup(ctx); err != nil {
			return err
		}
	}
	if s.parts != nil {
		return nil
	}
	_, err := s.streams(ctx, true)
	return err
}

func (s *Stream) ensureGroup(ctx context.Context, key string) error {
	err := s.rdb.XGroupCreateMkStream(ctx, key, s.group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return wrap("create consumer group", err)
	}
	return nil
}

// streams returns the stream keys to read: the crawl's, then each slave
// stream in the registry or the streams set, creating the group on new
// ones (on all with force) and dropping drained streams of slaves that
// left. It costs one round trip when nothing changed: the sink reads in
// batches, so once per batch.
func (s *Stream) streams(ctx context.Context, force bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if force {
		s.known = map[string]bool{}
	}
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	out := []string{s.keys.Events}
	for k := range s.known {
		if k != s.keys.Events {
			out = append(out, k)
		}
	}
	sort.Strings(out[1:])
	return out, nil
}

func (s *Stream) refresh(ctx context.Context) error {
	pipe := s.rdb.Pipeline()
	members := pipe.SMembers(ctx, s.keys.Streams)
	// the registry's first maxSlaves, as the functions read it
	// (registry_members): a slave's raw ZADDs cannot make the sink read
	// more streams than that
	reg := pipe.ZRange(ctx, s.keys.Slaves, 0, maxSlaves-1)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return wrap("list event streams", err)
	}
	registered := map[string]bool{}
	for _, sl := range reg.Val() {
		registered[sl] = true
	}
	want := map[string]string{s.keys.Events: ""} // key -> slave
	for sl := range registered {
		want[s.keys.SlaveEvents(sl)] = sl
	}
	for _, k := range members.Val() {
		if sl, ok := s.slaveOf(k); ok {
			want[k] = sl
		}
	}
	for k, sl := range want {
		if sl != "" && !registered[sl] {
			// a retired slave's stream: read it until it is empty
			// the library's function drop_stream (admin.lua) deletes a
			// retired slave's stream once it is drained, atomically
			sh := &shard{rdb: s.rdb, keys: s.keys, allKeys: s.keys.all()}
			dropped, err := sh.callInt(ctx, "drop_stream", sl)
			if err != nil {
				return wrap("drop event stream", err)
			}
			if dropped == 1 {
				delete(s.known, k)
				continue
			}
		}
		if s.known[k] {
			continue
		}
		if sl != "" {
			if err := s.rdb.SAdd(ctx, s.keys.Streams, k).Err(); err != nil {
				return wrap("record event stream", err)
			}
		}
		if err := s.ensureGroup(ctx, k); err != nil {
			return err
		}
		s.known[k] = true
	}
	return nil
}

// slaveOf returns the slave whose stream key is k.
func (s *Stream) slaveOf(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, s.keys.Prefix+sfxSlave)
	if !ok {
		return "", false
	}
	sl, ok := strings.CutSuffix(rest, ":ev")
	return sl, ok && sl != ""
}

// Read returns up to count entries per stream for consumer. With pending
// it returns entries delivered before but never acknowledged (after a
// crash) without waiting; otherwise it waits up to block for new ones.
func (s *Stream) Read(ctx context.Context, consumer string, count int, block time.Duration, pending bool) ([]Entry, error) {
	if s.parts != nil || s.owned != nil {
		return s.readParts(ctx, consumer, count, block, pending)
	}
	return s.readBlock(ctx, consumer, count, block, pending)
}

// readOne reads this stream's keys without waiting.
func (s *Stream) readOne(ctx context.Context, consumer string, count int, pending bool) ([]Entry, error) {
	return s.readBlock(ctx, consumer, count, -1, pending)
}

func (s *Stream) readBlock(ctx context.Context, consumer string, count int, block time.Duration, pending bool) ([]Entry, error) {
	id := ">"
	if pending {
		id, block = "0", -1
	}
	var res []redis.XStream
	for attempt := 0; ; attempt++ {
		keys, err := s.streams(ctx, attempt > 0)
		if err != nil {
			return nil, wrap("read events", err)
		}
		args := append([]string(nil), keys...)
		for range keys {
			args = append(args, id)
		}
		res, err = s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: s.group, Consumer: consumer,
			Streams: args, Count: int64(count), Block: block}).Result()
		if err == nil || errors.Is(err, redis.Nil) {
			break
		}
		// a stream deleted under the group (by its slave, or an
		// operator): make the groups again and read once more
		if attempt == 0 && strings.Contains(err.Error(), "NOGROUP") {
			continue
		}
		return nil, wrap("read events", err)
	}
	var out []Entry
	for _, st := range res {
		tag := ""
		if sl, ok := s.slaveOf(st.Stream); ok {
			tag = sl + s.tag + "/"
		} else if s.tag != "" {
			tag = s.tag + "/"
		}
		for _, m := range st.Messages {
			out = appendEntries(out, tag, m.ID, m.Values)
		}
	}
	return out, nil
}

// readParts reads every shard's streams without waiting, then, when none
// had anything and block > 0, waits a little (the sink reads again).
func (s *Stream) readParts(ctx context.Context, consumer string, count int, block time.Duration, pending bool) ([]Entry, error) {
	var out []Entry
	for _, p := range s.readable() {
		if p == s {
			es, err := s.readOne(ctx, consumer, count, pending)
			if err != nil {
				return out, err
			}
			out = append(out, es...)
			continue
		}
		es, err := p.Read(ctx, consumer, count, -1, pending)
		if err != nil {
			return out, err
		}
		out = append(out, es...)
	}
	if len(out) == 0 && block > 0 && !pending {
		t := time.NewTimer(min(block, 100*time.Millisecond))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return out, nil
}

// appendEntries adds the events of one stream entry: the fields type and
// data, or t0, d0, t1, d1, ... for several. An entry with neither (never
// written by redcrawl) gives one event of empty type, which the sink drops
// as undecodable and acks.
func appendEntries(out []Entry, tag, id string, v map[string]any) []Entry {
	sid := tag + id
	if t, ok := v[events.FieldType].(string); ok {
		d, _ := v[events.FieldData].(string)
		return append(out, Entry{ID: tag + eventID(id, 0), StreamID: sid, Type: events.Type(t), Data: []byte(d)})
	}
	n := 0
	for i := 0; i < eventsPerEntry; i++ {
		t, ok := v["t"+strconv.Itoa(i)].(string)
		if !ok {
			break
		}
		d, _ := v["d"+strconv.Itoa(i)].(string)
		out = append(out, Entry{ID: tag + eventID(id, i), StreamID: sid, Type: events.Type(t), Data: []byte(d)})
		n++
	}
	if n == 0 {
		out = append(out, Entry{ID: tag + eventID(id, 0), StreamID: sid})
	}
	return out
}

// Ack acknowledges and deletes entries once their records are stored; ids
// are Entry.StreamID values (slave/id for a slave's stream), repeats
// allowed.
func (s *Stream) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if s.parts != nil {
		return s.ackParts(ctx, ids)
	}
	byKey := map[string][]string{}
	var order []string
	for _, id := range ids {
		key := s.keys.Events
		if tag, raw, ok := strings.Cut(id, "/"); ok {
			// slave~k/ or ~k/: the shard tag was for ackParts
			if sl, _, _ := strings.Cut(tag, "~"); sl != "" {
				key = s.keys.SlaveEvents(sl)
			}
			id = raw
		}
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], id)
	}
	pipe := s.rdb.Pipeline()
	for _, key := range order {
		pipe.XAck(ctx, key, s.group, byKey[key]...)
		pipe.XDel(ctx, key, byKey[key]...)
	}
	_, err := pipe.Exec(ctx)
	return wrap("ack events", err)
}

// ackParts routes ids to their shards by the "~k" of their tags (none:
// shard 0).
func (s *Stream) ackParts(ctx context.Context, ids []string) error {
	byPart := map[string][]string{}
	for _, id := range ids {
		tag, _, tagged := strings.Cut(id, "/")
		shardTag := ""
		if i := strings.IndexByte(tag, '~'); i >= 0 && tagged {
			shardTag = tag[i:]
		}
		byPart[shardTag] = append(byPart[shardTag], id)
	}
	for _, p := range s.parts {
		if err := p.Ack(ctx, byPart[p.tag]...); err != nil {
			return err
		}
		delete(byPart, p.tag)
	}
	for t := range byPart {
		return fmt.Errorf("ack events: no stream of shard %q here", t)
	}
	return nil
}

// Append adds an event to the crawl's stream.
func (s *Stream) Append(ctx context.Context, e Event) error {
	if s.parts != nil {
		return s.parts[0].Append(ctx, e)
	}
	err := s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.keys.Events, Values: []any{events.FieldType, string(e.Type), events.FieldData, e.Data}}).Err()
	return wrap("append event", err)
}

// Len returns the number of entries not yet deleted, over every stream.
func (s *Stream) Len(ctx context.Context) (int64, error) {
	if s.parts != nil {
		var n int64
		for _, p := range s.parts {
			l, err := p.Len(ctx)
			if err != nil {
				return n, err
			}
			n += l
		}
		return n, nil
	}
	keys, err := s.streams(ctx, false)
	if err != nil {
		return 0, wrap("event stream length", err)
	}
	pipe := s.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		lens[i] = pipe.XLen(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, wrap("event stream length", err)
	}
	var n int64
	for _, l := range lens {
		n += l.Val()
	}
	return n, nil
}

// SlaveStreamBytes is about how many bytes of events a slave's stream on
// shard k holds that the sink has not yet taken (MEMORY USAGE with a few
// samples: a constant cost whatever its length); 0 when it has none. The
// work API reads it to keep a slave from writing events faster than the
// sink stores them.
func (f *Redis) SlaveStreamBytes(ctx context.Context, slave string, k int) (int64, error) {
	if k < 0 || k >= len(f.shards) {
		return 0, fmt.Errorf("slave stream of shard %d: the crawl has %d", k, len(f.shards))
	}
	s := f.shards[k]
	n, err := s.rdb.MemoryUsage(ctx, s.keys.SlaveEvents(slave), 16).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, wrap("slave stream size", err)
}
