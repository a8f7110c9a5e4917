package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

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

// Claim implements Frontier; it never returns render tasks (see
// ClaimWaitOpts).
func (f *shard) Claim(ctx context.Context, slave string, max int) ([]Lease, error) {
	ls, _, err := f.ClaimWait(ctx, slave, max)
	return ls, err
}

// ClaimWait is Claim that also says how long to wait before a host is
// ready (negative: no host has queued work and a free slot), so idle
// slaves sleep instead of polling. It never returns render tasks.
func (f *shard) ClaimWait(ctx context.Context, slave string, max int) ([]Lease, time.Duration, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, max, ClaimOptions{})
	return res.Leases, res.Wait, err
}

// ClaimWaitOpts leases up to max tasks (at most maxClaim) as ClaimWait
// does, render tasks too when opts.Render, and returns the version of the
// published rule set: the library's function claim (claim.lua).
func (f *shard) ClaimWaitOpts(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error) {
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
