package frontier

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// heartbeatScript registers or refreshes a slave, stamped with Redis's
// clock so that slaves' clocks never matter; a slave's first heartbeat (or
// its first after being declared dead) records a join.
//
// KEYS: the crawl's fixed keys (Keys.all).
// ARGV: prefix, slave, heartbeat_json, crawl, host, cfg.
// Returns: {joined (1 when the slave joined, else 0), then the control
// fields (control.go) addressed to it: drain:<slave> and every retire:<proxy>}.
var heartbeatScript = redis.NewScript(luaPrelude + `
local slave, info, crawl, host = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = now_ms()
local added = redis.call('ZADD', K_SLAVES, now, slave)
redis.call('HSET', K_SLAVEINFO, slave, info)
if added == 1 then
  emit('slave', cjson.encode({crawl = crawl, slave = slave, kind = 'join', host = host, at = now, detail = ''}))
  flush_events()
end
local out = {added}
local drain = 'drain:' .. slave
for _, k in ipairs(redis.call('HKEYS', K_CONTROL)) do
  if k == drain or string.sub(k, 1, 7) == 'retire:' then out[#out + 1] = k end
end
return out
`)

// Heartbeat implements Registry.
func (f *Redis) Heartbeat(ctx context.Context, hb events.Heartbeat) error {
	_, err := f.HeartbeatControl(ctx, hb)
	return err
}

// HeartbeatControl is Heartbeat that also returns the admin's requests to
// this slave (drain, retired proxies) at no extra round trip.
func (f *Redis) HeartbeatControl(ctx context.Context, hb events.Heartbeat) (Control, error) {
	hb.Crawl = f.opt.Crawl
	b, err := json.Marshal(hb)
	if err != nil {
		return Control{}, fmt.Errorf("heartbeat: %w", err)
	}
	res, err := f.run(ctx, heartbeatScript, hb.Slave, b, f.opt.Crawl, hb.Host)
	if err != nil {
		return Control{}, wrap("heartbeat", err)
	}
	arr, _ := res.([]any)
	if len(arr) == 0 {
		return Control{}, fmt.Errorf("heartbeat: script returned nothing")
	}
	return controlOf(hb.Slave, arr[1:]), nil
}

// Leave implements Registry. Leases the slave still holds are taken back.
func (f *Redis) Leave(ctx context.Context, slave, detail string) error {
	_, err := f.retire(ctx, slave, "leave", detail)
	return err
}

// Slaves implements Registry.
func (f *Redis) Slaves(ctx context.Context) ([]SlaveInfo, error) {
	pipe := f.rdb.Pipeline()
	decode := f.queueSlaves(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap("list slaves", err)
	}
	ss, _, err := decode()
	return ss, err
}

// queueSlaves adds the registry reads to a pipeline; decode reads them
// after Exec. render says which slaves' heartbeat JSON has "render": true
// (read apart from events.Heartbeat, which need not have the field).
func (f *Redis) queueSlaves(ctx context.Context, pipe redis.Pipeliner) (decode func() (ss []SlaveInfo, render map[string]bool, err error)) {
	seen := pipe.ZRangeWithScores(ctx, f.keys.Slaves, 0, -1)
	info := pipe.HGetAll(ctx, f.keys.SlaveInfo)
	return func() ([]SlaveInfo, map[string]bool, error) {
		var out []SlaveInfo
		render := map[string]bool{}
		for _, z := range seen.Val() {
			id, _ := z.Member.(string)
			var s SlaveInfo
			if raw, ok := info.Val()[id]; ok {
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
			s.LastSeen = time.UnixMilli(int64(z.Score))
			out = append(out, s)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Slave < out[j].Slave })
		return out, render, nil
	}
}

// Now returns Redis's clock, the one every lease and heartbeat is stamped
// with.
func (f *Redis) Now(ctx context.Context) (time.Time, error) {
	t, err := f.rdb.Time(ctx).Result()
	return t, wrap("redis time", err)
}

// Snapshot is Stats with what it is computed from: Redis's clock, the
// registered slaves' last heartbeats, and the slaves asked to drain.
type Snapshot struct {
	Stats
	Now      time.Time
	Slaves   []SlaveInfo
	Draining map[string]bool
}

// Stats implements Supervisor.
func (f *Redis) Stats(ctx context.Context) (Stats, error) {
	s, err := f.Snapshot(ctx)
	return s.Stats, err
}

// Snapshot reads the crawl's counters, clock, slaves and admin state in
// one round trip (the dashboard's overview).
func (f *Redis) Snapshot(ctx context.Context) (Snapshot, error) {
	pipe := f.rdb.Pipeline()
	tm := pipe.Time(ctx)
	st := pipe.HGetAll(ctx, f.keys.Stats)
	lease := pipe.ZCard(ctx, f.keys.Lease)
	retry := pipe.ZCard(ctx, f.keys.Retry)
	meta := pipe.HGetAll(ctx, f.keys.Meta)
	ready := pipe.ZCard(ctx, f.keys.Ready)
	control := pipe.HGetAll(ctx, f.keys.Control)
	decodeSlaves := f.queueSlaves(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		return Snapshot{}, wrap("stats", err)
	}
	get := func(m map[string]string, k string) int64 {
		v, _ := strconv.ParseInt(m[k], 10, 64)
		return v
	}
	s := Stats{
		Crawl:    f.opt.Crawl,
		Queued:   get(st.Val(), "queued"),
		InFlight: lease.Val(),
		Retry:    retry.Val(),
		Done:     get(st.Val(), "done"),
		Failed:   get(st.Val(), "failed"),
		Seen:     get(st.Val(), "seen"),
		Lost:     get(st.Val(), "lost"),
		Retried:  get(st.Val(), "retried"),

		Duplicates:  get(st.Val(), "duplicates"),
		TrapDropped: get(st.Val(), "trap_dropped"),
		Hosts:       ready.Val(),

		RenderQueued: get(st.Val(), "rqueued"),
		Requeued:     get(st.Val(), "requeued"),
		Reseeded:     get(st.Val(), "reseeded"),
	}
	s.PausedSince = pausedSince(control.Val()[ctlPaused])
	s.Paused = !s.PausedSince.IsZero()
	if fa := get(meta.Val(), "finished"); fa > 0 {
		s.Finished, s.FinishedAt = true, fa
	}
	snap := Snapshot{Stats: s, Now: tm.Val(), Draining: drainingOf(control.Val())}
	slaves, render, err := decodeSlaves()
	if err != nil {
		return snap, err
	}
	snap.Slaves = slaves
	for _, sl := range slaves {
		if snap.Now.Sub(sl.LastSeen) <= f.opt.DeadAfter {
			snap.SlavesAlive++
			snap.PagesPerSec += sl.PagesPerSec
			if render[sl.Slave] {
				snap.RenderSlaves++
			}
		}
	}
	return snap, nil
}
