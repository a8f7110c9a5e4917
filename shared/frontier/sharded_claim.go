// The sharded Redis frontier's claims and completions: a slave claims from
// its home shard first; the links a page finds for other shards go there.

package frontier

import (
	"context"
	"fmt"
	"time"
)

// Claim implements Frontier; it never returns render tasks.
func (f *Redis) Claim(ctx context.Context, slave string, max int) ([]Lease, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, max, ClaimOptions{})
	return res.Leases, err
}

// ClaimWait is Claim with the wait hint (see ClaimResult.Wait).
func (f *Redis) ClaimWait(ctx context.Context, slave string, max int) ([]Lease, time.Duration, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, max, ClaimOptions{})
	return res.Leases, res.Wait, err
}

// ClaimWaitOpts implements RenderClaimer: a slave claims from its home
// shard first and fills the rest of max from the other shards in turn
// (claimSharded).
func (f *Redis) ClaimWaitOpts(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error) {
	return f.limitClaim(ctx, max, func(max int) (ClaimResult, error) {
		if len(f.shards) == 1 {
			return f.shard.ClaimWaitOpts(ctx, slave, max, opts)
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
			res, err = f.shards[k].ClaimWaitOpts(ctx, slave, max-len(out.Leases), opts)
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

// Complete implements Frontier.
func (f *Redis) Complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
	if f.countCompletions(cs) {
		defer f.giveBack(ctx)
	}
	if len(f.shards) == 1 {
		return f.shard.Complete(ctx, slave, cs)
	}
	acked, _, err := f.completeSharded(ctx, slave, cs, 0, ClaimOptions{})
	return acked, err
}

// CompleteClaim implements CompleteClaimer: the links for other shards
// first, then the completions of each shard, the home shard's with the
// claim.
func (f *Redis) CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if f.countCompletions(cs) && max <= 0 {
		defer f.giveBack(ctx)
	}
	var acked []bool
	res, err := f.limitClaim(ctx, max, func(max int) (res ClaimResult, err error) {
		if len(f.shards) == 1 {
			acked, res, err = f.shard.CompleteClaim(ctx, slave, cs, max, opts)
		} else {
			acked, res, err = f.completeSharded(ctx, slave, cs, max, opts)
		}
		return res, err
	})
	return acked, res, err
}

func (f *Redis) completeSharded(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	idx, local, remote, remotePol, err := f.splitCompletions(cs)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	if err := f.sendRemote(ctx, slave, remote, remotePol); err != nil {
		return nil, ClaimResult{}, err
	}
	for k := range idx {
		f.woke(k) // a host slot freed, links, a retry or a release
	}
	return f.completeLocal(ctx, slave, idx, local, max, opts)
}

// splitCompletions puts each completion on its lease's shard with the
// links and policies of that shard's hosts (local, by index; idx lists
// each shard's), and the other links and policies by the shard they go to.
func (f *Redis) splitCompletions(cs []Completion) (idx map[int][]int, local []Completion,
	remote map[int][]Task, remotePol map[int]map[string]HostPolicy, err error) {
	idx = map[int][]int{}
	local = make([]Completion, len(cs))
	remote = map[int][]Task{}
	remotePol = map[int]map[string]HostPolicy{}
	for i, c := range cs {
		k := c.Lease.Shard
		if k < 0 || k >= len(f.shards) {
			return nil, nil, nil, nil, fmt.Errorf("complete %s: lease of shard %d, the crawl has %d", c.Lease.URL, k, len(f.shards))
		}
		idx[k] = append(idx[k], i)
		lc := c
		lc.Links, lc.Policies = nil, nil
		if c.Outcome == Done {
			for _, l := range c.Links {
				if s := f.ShardOf(l.Host); s == k {
					lc.Links = append(lc.Links, l)
				} else {
					remote[s] = append(remote[s], l)
				}
			}
		}
		for h, p := range c.Policies {
			s := f.ShardOf(h)
			if s == k {
				if lc.Policies == nil {
					lc.Policies = map[string]HostPolicy{}
				}
				lc.Policies[h] = p
			} else {
				if remotePol[s] == nil {
					remotePol[s] = map[string]HostPolicy{}
				}
				remotePol[s][h] = p
			}
		}
		local[i] = lc
	}
	return idx, local, remote, remotePol, nil
}

// sendRemote enqueues links on the shards they belong to, one call per
// shard (per seedBatch links): the first step of a sharded completion.
func (f *Redis) sendRemote(ctx context.Context, slave string, remote map[int][]Task, remotePol map[int]map[string]HostPolicy) error {
	for _, s := range sortedShards(remote) {
		if err := f.shards[s].enqueueLinks(ctx, slave, remote[s], remotePol[s]); err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		f.woke(s)
	}
	return nil
}

// completeLocal completes each shard's completions (split), the home
// shard's last with the claim when max > 0.
func (f *Redis) completeLocal(ctx context.Context, slave string, idx map[int][]int, local []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	acked := make([]bool, len(local))
	sub := func(k int) []Completion {
		out := make([]Completion, len(idx[k]))
		for j, i := range idx[k] {
			out[j] = local[i]
		}
		return out
	}
	for _, k := range sortedShards(idx) {
		if k == f.home && max > 0 {
			continue
		}
		a, err := f.shards[k].Complete(ctx, slave, sub(k))
		if err != nil {
			return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			acked[i] = a[j]
		}
	}
	if max <= 0 {
		return acked, ClaimResult{}, nil
	}
	a, res, err := f.shards[f.home].CompleteClaim(ctx, slave, sub(f.home), max, opts)
	if err != nil {
		return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", f.home, err)
	}
	for j, i := range idx[f.home] {
		acked[i] = a[j]
	}
	res, err = f.claimSharded(ctx, slave, max, opts, &res)
	return acked, res, err
}

// enqueueLinks calls the library's function links (seed.lua), which
// enqueues links found on a page of another shard as complete does with a
// page's links, for links of this shard's hosts, in
// batches; links the link cache knows are left out, and the ones sent are
// remembered once the call succeeded.
func (f *shard) enqueueLinks(ctx context.Context, slave string, links []Task, policies map[string]HostPolicy) error {
	var fps []uint64
	if f.links != nil {
		links, fps = f.unknownLinks(links)
	}
	if len(links) == 0 && len(policies) == 0 {
		return nil
	}
	for from := 0; from < len(links) || from == 0; from += seedBatch {
		to := min(from+seedBatch, len(links))
		var pol map[string]HostPolicy
		if from == 0 {
			pol = policies
		}
		args := []any{slave, len(pol), to - from}
		args = appendPolicies(args, pol)
		var batchFPs []uint64
		if fps != nil {
			batchFPs = fps[from:to]
		}
		args = f.appendTuplesFP(args, links[from:to], batchFPs)
		if _, err := f.callDurable(ctx, "links", args...); err != nil {
			return wrap("enqueue links", err)
		}
		for _, fp := range batchFPs {
			f.links.add(fp)
		}
		if to >= len(links) {
			break
		}
	}
	return nil
}
