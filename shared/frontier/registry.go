package frontier

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/events"
)

// heartbeatScript registers or refreshes a slave, stamped with Redis's
// clock so that slaves' clocks never matter; a slave's first heartbeat (or
// its first after being declared dead or leaving) records a join. The
// heartbeat goes to the slave's own key (Keys.SlaveBeat); the registry
// only gains the slave (ZADD NX), which is all a slave's Redis user may do
// to it (acl.go).
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, slave, heartbeat_json, crawl, host, cfg.
// Returns: {joined (1 when the slave joined, else 0), then the control
// fields (control.go) addressed to it: drain:<slave> and every retire:<proxy>}.
var heartbeatScript = redis.NewScript(luaPrelude + `
local slave, info, crawl, host = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local own_err = check_own(slave)
if own_err then return own_err end
local now = now_ms()
local added = redis.call('ZADD', K_SLAVES, 'NX', now, slave)
local had = redis.call('EXISTS', k_sbeat(slave))
redis.call('SET', k_sbeat(slave), now .. '\t' .. info)
if added == 1 or had == 0 then
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
func (f *shard) Heartbeat(ctx context.Context, hb events.Heartbeat) error {
	_, err := f.HeartbeatControl(ctx, hb)
	return err
}

// HeartbeatControl is Heartbeat that also returns the admin's requests to
// this slave (drain, retired proxies) at no extra round trip.
func (f *shard) HeartbeatControl(ctx context.Context, hb events.Heartbeat) (Control, error) {
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

// Leave implements Registry: the slave gives back the leases it still
// holds and records its leave (leaveScript, which a slave's restricted
// Redis user may run); the master's monitor then drops it from the
// registry.
func (f *shard) Leave(ctx context.Context, slave, detail string) error {
	return f.leave(ctx, slave, detail, true)
}

func (f *shard) leave(ctx context.Context, slave, detail string, record bool) error {
	_, err := f.run(ctx, leaveScript, f.opt.MaxAttempts, f.opt.Crawl, slave, detail, boolArg(record))
	return wrap("leave", err)
}

// RetireGone drops from the registry a slave whose heartbeat key is gone
// (it left, or the master retired it): silently when it holds no lease,
// else as a death (its leases are taken back). The monitor calls it for
// slaves Registered reports Gone.
func (f *shard) RetireGone(ctx context.Context, slave string) (int, error) {
	return f.retire(ctx, slave, "gone", "heartbeats missed", true)
}

// registrySrc lists the registry with each slave's heartbeat.
//
// KEYS: the meta key (Keys.all).
// ARGV: prefix, then cfg (unused).
// Returns: a flat array, 3 entries per registered slave: id, registered
// at (ms), and its heartbeat key's value (ms \t JSON) or false.
const registrySrc = `
local out = {}
local reg = redis.call('ZRANGE', K_SLAVES, 0, -1, 'WITHSCORES')
for k = 1, #reg, 2 do
  out[#out + 1] = reg[k]
  out[#out + 1] = reg[k + 1]
  out[#out + 1] = redis.call('GET', k_sbeat(reg[k]))
end
`

var registryScript = redis.NewScript(luaPrelude + registrySrc + "return out\n")

// Slaves implements Registry: the registered slaves that have a heartbeat
// (not those that left).
func (f *shard) Slaves(ctx context.Context) ([]SlaveInfo, error) {
	all, err := f.Registered(ctx)
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
func (f *shard) Registered(ctx context.Context) ([]SlaveInfo, error) {
	res, err := f.run(ctx, registryScript)
	if err != nil {
		return nil, wrap("list slaves", err)
	}
	ss, _, err := decodeRegistry(res)
	return ss, err
}

// decodeRegistry decodes registrySrc's result. render says which slaves'
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

// inFlightSrc follows registrySrc in Snapshot's script: it appends the
// number of leases held, over every registered slave and the legacy
// crawl-wide lease zset.
const inFlightSrc = `
local leased = redis.call('ZCARD', K_LEGACY_LEASE)
for k = 1, #reg, 2 do leased = leased + redis.call('ZCARD', k_slease(reg[k])) end
out[#out + 1] = leased
return out
`

// Now returns Redis's clock, the one every lease and heartbeat is stamped
// with.
func (f *shard) Now(ctx context.Context) (time.Time, error) {
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
func (f *shard) Stats(ctx context.Context) (Stats, error) {
	s, err := f.Snapshot(ctx)
	return s.Stats, err
}

// Snapshot reads the crawl's counters, clock, slaves and admin state in
// one round trip (the dashboard's overview).
func (f *shard) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := f.snapshot(ctx)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// first use on this Redis (or after SCRIPT FLUSH): load, read again
		if lerr := snapshotScript.Load(ctx, f.rdb).Err(); lerr != nil {
			return Snapshot{}, wrap("stats", lerr)
		}
		snap, err = f.snapshot(ctx)
	}
	return snap, err
}

// snapshotScript lists the registry and counts the leases held (registrySrc
// and inFlightSrc), in Snapshot's pipeline by its SHA.
var snapshotScript = redis.NewScript(luaPrelude + registrySrc + inFlightSrc)

func (f *shard) snapshot(ctx context.Context) (Snapshot, error) {
	pipe := f.rdb.Pipeline()
	tm := pipe.Time(ctx)
	st := pipe.HGetAll(ctx, f.keys.Stats)
	reg := pipe.EvalSha(ctx, snapshotScript.Hash(), f.allKeys, f.keys.Prefix, f.cfg)
	retry := pipe.ZCard(ctx, f.keys.Retry)
	nextRetry := pipe.ZRangeWithScores(ctx, f.keys.Retry, 0, 0)
	finish := pipe.HGetAll(ctx, f.keys.Finish)
	ready := pipe.ZCard(ctx, f.keys.Ready)
	control := pipe.HGetAll(ctx, f.keys.Control)
	if _, err := pipe.Exec(ctx); err != nil {
		return Snapshot{}, wrap("stats", err)
	}
	get := func(m map[string]string, k string) int64 {
		v, _ := strconv.ParseInt(m[k], 10, 64)
		return v
	}
	regArr, _ := reg.Val().([]any)
	var inFlight int64
	if len(regArr) > 0 {
		inFlight, _ = toInt(regArr[len(regArr)-1])
		regArr = regArr[:len(regArr)-1]
	}
	s := Stats{
		Crawl:    f.opt.Crawl,
		Queued:   get(st.Val(), "queued"),
		InFlight: inFlight,
		Retry:    retry.Val(),
		NextRetryAt: func() int64 {
			if z := nextRetry.Val(); len(z) > 0 {
				return int64(z[0].Score)
			}
			return 0
		}(),
		Done:    get(st.Val(), "done"),
		Failed:  get(st.Val(), "failed"),
		Seen:    get(st.Val(), "seen"),
		Lost:    get(st.Val(), "lost"),
		Retried: get(st.Val(), "retried"),

		Duplicates:  get(st.Val(), "duplicates"),
		TrapDropped: get(st.Val(), "trap_dropped"),
		Hosts:       ready.Val(),

		RenderQueued: get(st.Val(), "rqueued"),
		Requeued:     get(st.Val(), "requeued"),
		Reseeded:     get(st.Val(), "reseeded"),
		RecrawlRun:   get(st.Val(), statRecrawlRun),
		RecrawlAt:    get(st.Val(), statRecrawlAt),
	}
	s.PausedSince = pausedSince(control.Val()[ctlPaused])
	s.Paused = !s.PausedSince.IsZero()
	if fa := get(finish.Val(), "finished"); fa > 0 {
		s.Finished, s.FinishedAt = true, fa
	}
	snap := Snapshot{Stats: s, Now: tm.Val(), Draining: drainingOf(control.Val())}
	registered, render, err := decodeRegistry(regArr)
	if err != nil {
		return snap, err
	}
	for _, sl := range registered {
		if sl.Gone {
			continue
		}
		snap.Slaves = append(snap.Slaves, sl)
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
