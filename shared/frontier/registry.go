package frontier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Heartbeat implements Registry.
func (r *Redis) Heartbeat(ctx context.Context, hb events.Heartbeat) error {
	_, err := r.HeartbeatControl(ctx, hb)
	return err
}

// HeartbeatControl is Heartbeat that also returns the admin's requests to
// this slave (drain, retired proxies) at no extra round trip: the
// library's function heartbeat (registry.lua).
func (r *Redis) HeartbeatControl(ctx context.Context, hb events.Heartbeat) (Control, error) {
	f := r.shards[0]
	hb.Crawl = f.opt.Crawl
	b, err := json.Marshal(hb)
	if err != nil {
		return Control{}, fmt.Errorf("heartbeat: %w", err)
	}
	arr, err := f.callSlice(ctx, "heartbeat", hb.Slave, b, truncate(hb.Host, maxHostBytes))
	if err != nil {
		return Control{}, wrap("heartbeat", err)
	}
	if len(arr) == 0 {
		return Control{}, fmt.Errorf("heartbeat: no result")
	}
	c := controlOf(hb.Slave, arr[1:])
	// the finish mark, and whether the crawl has limits (limits.go)
	pipe := f.rdb.Pipeline()
	fin := pipe.HGet(ctx, f.keys.Finish, "finished")
	lim := pipe.Exists(ctx, f.keys.Limits)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Control{}, wrap("heartbeat: finished", err)
	}
	c.Finished = fin.Err() == nil
	r.lim.on.Store(lim.Val() > 0)
	return c, nil
}

// Finished reports whether the crawl is finished: the mark of the master's
// finish decision (shard 0's finish hash), which a slave's user may read.
func (r *Redis) Finished(ctx context.Context) (bool, error) {
	f := r.shards[0]
	_, err := f.rdb.HGet(ctx, f.keys.Finish, "finished").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, wrap("finished", err)
}

func (f *shard) leave(ctx context.Context, slave, detail string, record bool) error {
	_, err := f.call(ctx, "leave", slave, truncate(detail, maxReasonBytes), boolArg(record))
	return wrap("leave", err)
}

// retireGone drops from the registry a slave whose heartbeat key is gone
// (it left, or the master retired it): silently when it holds no lease,
// else as a death (its leases are taken back). The monitor calls it for
// slaves Registered reports Gone.
func (f *shard) retireGone(ctx context.Context, slave string) (int, error) {
	return f.retire(ctx, slave, "gone", "heartbeats missed", true)
}

// Slaves implements Registry: the registered slaves that have a heartbeat
// (not those that left).
func (r *Redis) Slaves(ctx context.Context) ([]SlaveInfo, error) {
	all, err := r.Registered(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, s := range all {
		if !s.Gone {
			out = append(out, s)
		}
	}
	return out, nil
}

// Registered lists every slave in the registry, those that left or were
// retired (Gone: no heartbeat key) too; the monitor walks it.
func (r *Redis) Registered(ctx context.Context) ([]SlaveInfo, error) {
	f := r.shards[0]
	res, err := f.call(ctx, "registry")
	if err != nil {
		return nil, wrap("list slaves", err)
	}
	ss, _, err := decodeRegistry(res)
	return ss, err
}

// decodeRegistry decodes the function registry's result (registry.lua). render says which slaves'
// heartbeat JSON has "render": true (read apart from events.Heartbeat,
// which need not have the field). A slave's LastSeen is its last
// heartbeat, or when it registered when it has none.
func decodeRegistry(res any) ([]SlaveInfo, map[string]bool, error) {
	arr, _ := res.([]any)
	var out []SlaveInfo
	render := map[string]bool{}
	for k := 0; k+2 < len(arr); k += 3 {
		id, _ := arr[k].(string)
		score, _ := arr[k+1].(string)
		reg, _ := strconv.ParseFloat(score, 64)
		s := SlaveInfo{LastSeen: time.UnixMilli(int64(reg))}
		beat, ok := arr[k+2].(string)
		if !ok {
			s.Gone = true
		} else {
			msStr, raw, _ := strings.Cut(beat, "\t")
			if ms, err := strconv.ParseInt(msStr, 10, 64); err == nil {
				s.LastSeen = time.UnixMilli(ms)
			}
			if err := json.Unmarshal([]byte(raw), &s.Heartbeat); err != nil {
				return nil, nil, fmt.Errorf("list slaves: decode %s: %w", id, err)
			}
			var caps struct {
				Render bool `json:"render"`
			}
			if json.Unmarshal([]byte(raw), &caps) == nil && caps.Render {
				render[id] = true
			}
		}
		s.Slave = id
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slave < out[j].Slave })
	return out, render, nil
}

// Now returns Redis's clock, the one every lease and heartbeat is stamped
// with.
func (r *Redis) Now(ctx context.Context) (time.Time, error) { return r.shards[0].now(ctx) }

// now returns the shard's Redis clock.
func (f *shard) now(ctx context.Context) (time.Time, error) {
	t, err := f.rdb.Time(ctx).Result()
	return t, wrap("redis time", err)
}

// PruneRegistry drops from the registries of the shards given (nil: all)
// the members that are no slave: no heartbeat, lease, lease data or event
// stream of theirs on that shard. A function registers only its caller
// and with one of those keys, but a slave's Redis user may ZADD the
// registry itself; the functions read only its first maxSlaves members
// (registry_members), so a registry within that is left alone and only
// one flooded past it is scanned (SCAN-like, a thousand members a round
// trip). It returns how many members it dropped.
func (f *Redis) PruneRegistry(ctx context.Context, shards []int) (int, error) {
	if shards == nil {
		shards = f.all()
	}
	total := 0
	for _, k := range shards {
		n, err := f.shards[k].pruneRegistry(ctx)
		total += n
		if err != nil {
			return total, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return total, nil
}

func (f *shard) pruneRegistry(ctx context.Context) (int, error) {
	reg := f.keys.Slaves
	size, err := f.rdb.ZCard(ctx, reg).Result()
	if err != nil || size <= maxSlaves {
		return 0, wrap("prune registry", err)
	}
	dropped := 0
	var cursor uint64
	for {
		var batch []string
		batch, cursor, err = f.rdb.ZScan(ctx, reg, cursor, "", 2000).Result()
		if err != nil {
			return dropped, wrap("prune registry", err)
		}
		var ids []string
		for i := 0; i < len(batch); i += 2 {
			ids = append(ids, batch[i])
		}
		pipe := f.rdb.Pipeline()
		held := make([]*redis.IntCmd, len(ids))
		for i, id := range ids {
			held[i] = pipe.Exists(ctx, f.keys.SlaveBeat(id), f.keys.SlaveLease(id), f.keys.SlaveLeaseData(id), f.keys.SlaveEvents(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return dropped, wrap("prune registry", err)
		}
		var junk []any
		for i, id := range ids {
			if held[i].Val() == 0 {
				junk = append(junk, id)
			}
		}
		if len(junk) > 0 {
			n, err := f.rdb.ZRem(ctx, reg, junk...).Result()
			dropped += int(n)
			if err != nil {
				return dropped, wrap("prune registry", err)
			}
		}
		if cursor == 0 {
			return dropped, nil
		}
	}
}
