// Claims: a crawl's (Redis) from the slave's home shard first, then the
// others in turn; a shard's (shard) by the library's function claim.

package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// ClaimWaitOpts implements Frontier: a slave claims from its home
// shard first and fills the rest of max from the other shards in turn
// (claimSharded).
func (f *Redis) ClaimWaitOpts(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error) {
	return f.limitClaim(ctx, max, func(max int) (ClaimResult, error) {
		if len(f.shards) == 1 {
			return f.shards[0].claim(ctx, slave, max, opts)
		}
		return f.claimSharded(ctx, slave, max, opts, nil)
	})
}

// claimSharded claims up to max tasks: the home shard's first (home, when
// a CompleteClaim already claimed there), then from each other shard,
// starting after the home shard, until max is filled. A shard that had
// nothing to lease is left alone for a while (quiet: its own hint, or
// quietEmpty / quietBusy), so an idle slave polls its home shard at its
// idle pace and each other shard every quietEmpty, not S times as
// often. The result's wait hint is the soonest of the shards asked or
// left alone.
func (f *Redis) claimSharded(ctx context.Context, slave string, max int, opts ClaimOptions, home *ClaimResult) (ClaimResult, error) {
	n := len(f.shards)
	now := time.Now().UnixMilli()
	var out ClaimResult
	var wait int64 = -1 // ms; -1: none known
	busy := false
	hint := func(r ClaimResult) {
		switch {
		case r.Wait >= 0:
			if w := r.Wait.Milliseconds(); wait < 0 || w < wait {
				wait = w
			}
		case r.Busy:
			busy = true
		}
	}
	class := 0
	if opts.Render {
		class = 1
	}
	first := true
	for i := 0; i < n && len(out.Leases) < max; i++ {
		k := (f.home + i) % n
		mark := &f.quiet[class][k]
		var res ClaimResult
		if i == 0 && home != nil {
			res = *home
		} else {
			if i > 0 && mark.until.Load() > now {
				if r := mark.readyAt.Load(); r > 0 {
					if w := r - now; wait < 0 || w < wait {
						wait = w
					}
				} else if mark.busy.Load() {
					busy = true
				}
				continue
			}
			var err error
			res, err = f.shards[k].claim(ctx, slave, max-len(out.Leases), opts)
			if err != nil {
				if len(out.Leases) > 0 {
					break // keep what was leased; the next claim asks again
				}
				return out, fmt.Errorf("shard %d: %w", k, err)
			}
		}
		if first {
			out.RulesVersion = res.RulesVersion
			first = false
		}
		if len(res.Leases) > 0 {
			mark.until.Store(0)
			out.Leases = append(out.Leases, res.Leases...)
			continue
		}
		hint(res)
		switch {
		case res.Wait >= 0:
			mark.readyAt.Store(now + res.Wait.Milliseconds())
			mark.busy.Store(false)
			mark.until.Store(now + res.Wait.Milliseconds())
		case res.Busy:
			mark.readyAt.Store(0)
			mark.busy.Store(true)
			mark.until.Store(now + quietBusy.Milliseconds())
		default:
			mark.readyAt.Store(0)
			mark.busy.Store(false)
			mark.until.Store(now + quietEmpty.Milliseconds())
		}
	}
	if len(out.Leases) == 0 {
		out.Wait, out.Busy = -1, busy
		if wait >= 0 {
			out.Wait, out.Busy = time.Duration(wait)*time.Millisecond, false
		}
	}
	return out, nil
}

// WakeAll ends every shard's quiet: work was announced (WorkMessage), on
// shards this process cannot tell.
func (f *Redis) WakeAll() {
	for k := range f.shards {
		f.woke(k)
	}
}

// woke ends shard k's quiet: this process just added work there.
func (f *Redis) woke(k int) {
	for c := range f.quiet {
		if f.quiet[c] != nil {
			f.quiet[c][k].until.Store(0)
		}
	}
}

// ClaimOptions qualify a claim.
type ClaimOptions struct {
	// Render: the slave can render (headless browser), so it gets render
	// tasks (Task.Render) too; without it, never.
	Render bool
	// MaxHeld, when positive, caps the leases the slave holds on a shard
	// once the claim is done (the work API's per-token limit); a slave
	// at the cap gets no lease and a busy answer.
	MaxHeld int
}

// maxHeld is MaxHeld as the functions take it: 0 for none.
func (o ClaimOptions) maxHeld() int {
	if o.MaxHeld < 0 {
		return 0
	}
	return o.MaxHeld
}

// ClaimResult is what ClaimWaitOpts returns.
type ClaimResult struct {
	Leases []Lease
	// Wait is how long until a host is ready (negative: no host has queued
	// work the slave can take and a free slot), so idle slaves sleep instead
	// of polling. A claim that leased all it asked for says 0 without
	// looking: a slave waits only after a short claim.
	Wait time.Duration
	// Busy: Wait is negative because every host with queued tasks is at
	// its concurrency, or because requests are in flight whose acks may
	// bring links, not because the crawl is idle: work may come as soon as
	// any slave's lease ends. Either way a claim that came short marked
	// the shard, and the call that makes a host claimable announces work
	// (WorkMessage), so a slave waits for that, not a poll.
	Busy bool
	// RulesVersion is the version of the rule set the master published
	// (PutRules), "" when none: a slave whose rules are older reloads them
	// (GetRules). It comes with every claim at no extra round trip; a claim
	// of max <= 0 makes no call and leaves it "".
	RulesVersion string
}

// claim is Redis.ClaimWaitOpts on one shard: it leases up to max tasks
// (at most maxClaim), render tasks too when opts.Render, says how long to
// wait before a host is ready (negative: no host has queued work and a
// free slot) and returns the version of the published rule set: the
// library's function claim (claim.lua).
func (f *shard) claim(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error) {
	if max <= 0 {
		return ClaimResult{}, nil
	}
	arr, err := f.callSlice(ctx, "claim", slave, min(max, maxClaim), seed(), boolArg(opts.Render), opts.maxHeld())
	if err != nil {
		return ClaimResult{}, wrap("claim", err)
	}
	cr, err := f.claimResult(slave, arr)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("claim: %w", err)
	}
	return cr, nil
}

// leaseFields is the number of the function claim's results per lease.
const leaseFields = 7

// leaseOf reads one lease of the function claim's result.
func (f *shard) leaseOf(slave string, v []any) (Lease, error) {
	host, _ := v[0].(string)
	var prio int64
	var importance float64
	if f.pq() {
		ps, _ := v[1].(string)
		score, err := strconv.ParseFloat(ps, 64)
		if err != nil {
			return Lease{}, fmt.Errorf("score: %w", err)
		}
		importance = -score
	} else if p, err := toInt(v[1]); err != nil {
		return Lease{}, fmt.Errorf("priority: %w", err)
	} else {
		prio = p
	}
	task, _ := v[2].(string)
	t, err := parseTask(host, prio, task)
	if err != nil {
		return Lease{}, err
	}
	token, _ := toInt(v[3])
	at, _ := toInt(v[4])
	dl, _ := toInt(v[5])
	if val, _ := v[6].(string); val != "" {
		t.Revisit = decodeValidators(val)
	}
	return Lease{Task: t, Slave: slave, Token: token, LeasedAt: time.UnixMilli(at), Deadline: time.UnixMilli(dl),
		Importance: importance, Shard: f.index}, nil
}

// claimResult reads the function claim's result (claim.lua).
func (f *shard) claimResult(slave string, arr []any) (ClaimResult, error) {
	if len(arr) < 2 || len(arr)%leaseFields != 2 {
		return ClaimResult{}, fmt.Errorf("%d values", len(arr))
	}
	version, _ := arr[len(arr)-1].(string)
	hint, _ := toInt(arr[len(arr)-2])
	wait := time.Duration(hint) * time.Millisecond
	if hint < 0 {
		wait = -1
	}
	busy := hint == -2
	arr = arr[:len(arr)-2]
	leases := make([]Lease, 0, len(arr)/leaseFields)
	for i := 0; i < len(arr); i += leaseFields {
		l, err := f.leaseOf(slave, arr[i:i+leaseFields])
		if err != nil {
			// a task no function queued (a slave's raw push): left to
			// expire, and failed after its attempts, rather than failing
			// the claim of every lease beside it
			continue
		}
		// a leased URL went through the seen set when it was queued: a
		// link to it found later is one the function would only find
		// seen (linkCache); no hash without a cache. Not on a node with
		// replicas: a claim is not waited for (durable.go), so a URL
		// queued by a call still waiting for its replica may be leased
		// here, and both lost in a failover; the cache would then keep
		// the call's retry from queuing it again.
		if f.links != nil && !f.replicated() {
			f.links.add(Fingerprint(l.URL))
		}
		leases = append(leases, l)
	}
	return ClaimResult{Leases: leases, Wait: wait, Busy: busy, RulesVersion: version}, nil
}
