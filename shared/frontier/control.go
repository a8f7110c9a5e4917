// The admin's controls (pause, drain, retired proxies): written to every
// shard by the crawl (Redis), read from shard 0.

package frontier

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pause implements the admin's pause on every shard.
func (f *Redis) Pause(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.pause(ctx) })
}

// Resume undoes Pause on every shard.
func (f *Redis) Resume(ctx context.Context) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.resume(ctx) })
}

// Drain asks a slave to drain, on every shard.
func (f *Redis) Drain(ctx context.Context, slave string) (bool, error) {
	ok, err := f.shards[0].drain(ctx, slave)
	if err != nil || !ok || len(f.shards) == 1 {
		return ok, err
	}
	for k, s := range f.shards[1:] {
		if err := s.rdb.HSet(ctx, s.keys.Control, ctlDrain+slave, time.Now().UnixMilli()).Err(); err != nil {
			return true, wrap(fmt.Sprintf("drain on shard %d", k+1), err)
		}
	}
	return true, nil
}

// RetireProxy retires a proxy on every shard's control hash.
func (f *Redis) RetireProxy(ctx context.Context, proxy string) (bool, error) {
	return eachShard(f, func(s *shard) (bool, error) { return s.retireProxy(ctx, proxy) })
}

// eachShard runs fn on every shard, shard 0 last; its result is shard 0's.
func eachShard(f *Redis, fn func(*shard) (bool, error)) (bool, error) {
	for k := len(f.shards) - 1; k > 0; k-- {
		if _, err := fn(f.shards[k]); err != nil {
			return false, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return fn(f.shards[0])
}

// Admin controls (the master's dashboard and CLI) live in the control hash
// (Keys.Control):
//
//   - paused: the claim script leases nothing while it is set; leases
//     already held finish normally, retries still fall due.
//   - drain:<slave>: that slave gets no more leases and, told by its
//     heartbeat, finishes what it holds and leaves; the field goes when
//     the slave leaves or dies.
//   - retire:<proxy>: every slave retires that proxy (redacted URL as in
//     the proxy events), told by its heartbeat.
const (
	ctlPaused = "paused"
	ctlDrain  = "drain:"
	ctlRetire = "retire:"
)

// Control is the admin state a slave is told with each heartbeat.
type Control struct {
	// Drain: this slave is asked to finish its leases and leave.
	Drain bool
	// RetiredProxies are the proxies (redacted URLs) retired by an admin.
	RetiredProxies []string
	// Finished: the crawl is finished (the master's finish decision, read
	// with the heartbeat); a slave run for one crawl leaves.
	Finished bool
}

// pause stops every claim of the crawl until Resume. It returns false when
// the crawl was already paused.
func (f *shard) pause(ctx context.Context) (bool, error) {
	now, err := f.now(ctx)
	if err != nil {
		return false, fmt.Errorf("pause: %w", err)
	}
	ok, err := f.rdb.HSetNX(ctx, f.keys.Control, ctlPaused, now.UnixMilli()).Result()
	return ok, wrap("pause", err)
}

// resume lets claims go on after Pause. It returns false when the crawl
// was not paused.
func (f *shard) resume(ctx context.Context) (bool, error) {
	n, err := f.rdb.HDel(ctx, f.keys.Control, ctlPaused).Result()
	return n > 0, wrap("resume", err)
}

// Paused says whether the crawl is paused.
func (r *Redis) Paused(ctx context.Context) (bool, error) {
	f := r.shards[0]
	n, err := f.rdb.HExists(ctx, f.keys.Control, ctlPaused).Result()
	return n, wrap("paused", err)
}

// drain asks a registered slave to finish its leases and leave; it gets no
// new lease from now on (the library's function drain: registry.lua). It
// returns false when no such slave is registered.
func (f *shard) drain(ctx context.Context, slave string) (bool, error) {
	res, err := f.callInt(ctx, "drain", slave)
	return res == 1, wrap("drain", err)
}

// Draining lists the slaves asked to drain.
func (r *Redis) Draining(ctx context.Context) (map[string]bool, error) {
	f := r.shards[0]
	all, err := f.rdb.HGetAll(ctx, f.keys.Control).Result()
	if err != nil {
		return nil, wrap("draining", err)
	}
	return drainingOf(all), nil
}

// drainingOf picks the drained slaves out of the control hash.
func drainingOf(control map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range control {
		if s, ok := strings.CutPrefix(k, ctlDrain); ok {
			out[s] = true
		}
	}
	return out
}

// retireProxy asks every slave to retire a proxy, named by its redacted
// URL (as in the proxy events). It returns false when it was already
// retired.
func (f *shard) retireProxy(ctx context.Context, proxy string) (bool, error) {
	if proxy == "" {
		return false, fmt.Errorf("retire proxy: empty proxy")
	}
	now, err := f.now(ctx)
	if err != nil {
		return false, fmt.Errorf("retire proxy: %w", err)
	}
	ok, err := f.rdb.HSetNX(ctx, f.keys.Control, ctlRetire+proxy, now.UnixMilli()).Result()
	return ok, wrap("retire proxy", err)
}

// RetiredProxies lists the proxies retired by an admin.
func (r *Redis) RetiredProxies(ctx context.Context) ([]string, error) {
	f := r.shards[0]
	all, err := f.rdb.HKeys(ctx, f.keys.Control).Result()
	if err != nil {
		return nil, wrap("retired proxies", err)
	}
	var out []string
	for _, k := range all {
		if p, ok := strings.CutPrefix(k, ctlRetire); ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// requeueFailed puts failed tasks (attempts used up) back in their queues
// with their attempts reset, up to limit (0 or less: all), seedBatch a
// call (the library's function requeue_failed: seed.lua). It returns how
// many.
func (f *shard) requeueFailed(ctx context.Context, limit int) (int, error) {
	total := 0
	for limit <= 0 || total < limit {
		batch := 1000
		if limit > 0 {
			batch = min(batch, limit-total)
		}
		n, err := f.callInt(ctx, "requeue_failed", batch)
		if err != nil {
			return total, wrap("requeue failed", err)
		}
		total += int(n)
		if int(n) < batch {
			break
		}
	}
	return total, nil
}

// reseed enqueues tasks again for a recrawl, seen or not, with their
// hosts' policies first (as SeedWithPolicies); a task whose URL is leased
// or already queued is skipped (the library's function reseed: seed.lua).
// It returns how many were enqueued.
func (f *shard) reseed(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (int, error) {
	n, err := f.withPolicies(ctx, "reseed", tasks, policies, appendValidators)
	return n, wrap("reseed", err)
}

// controlOf decodes the control hash fields a heartbeat returns.
func controlOf(slave string, fields []any) Control {
	var c Control
	for _, v := range fields {
		k, _ := v.(string)
		switch {
		case k == ctlDrain+slave:
			c.Drain = true
		case strings.HasPrefix(k, ctlRetire):
			c.RetiredProxies = append(c.RetiredProxies, k[len(ctlRetire):])
		}
	}
	sort.Strings(c.RetiredProxies)
	return c
}

// pausedSince returns when the crawl was paused (zero when it is not).
func pausedSince(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
