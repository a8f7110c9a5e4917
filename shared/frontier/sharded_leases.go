// The sharded Redis frontier's leases: extended, given back and recovered
// on every shard.

package frontier

import (
	"context"
	"fmt"
)

// Extend implements Frontier.
func (f *Redis) Extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	if len(f.shards) == 1 {
		return f.shard.Extend(ctx, slave, leases)
	}
	idx := map[int][]int{}
	for i, l := range leases {
		if l.Shard < 0 || l.Shard >= len(f.shards) {
			return nil, fmt.Errorf("extend %s: lease of shard %d, the crawl has %d", l.URL, l.Shard, len(f.shards))
		}
		idx[l.Shard] = append(idx[l.Shard], i)
	}
	held := make([]bool, len(leases))
	for _, k := range sortedShards(idx) {
		sub := make([]Lease, len(idx[k]))
		for j, i := range idx[k] {
			sub[j] = leases[i]
		}
		h, err := f.shards[k].Extend(ctx, slave, sub)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			held[i] = h[j]
		}
	}
	return held, nil
}

// HeldLeases returns what the frontier recorded of the leases a slave
// names (URL, Token and Shard as its completions name them): out[i] the
// lease as it was leased (its task: depth, hops, sitemap level, attempt;
// its priority and the time it was leased), held[i] whether slave holds
// it with that token now. The work API reads them to judge what a slave
// of it says about its leases; whether the lease is still held when the
// completion is applied is the function complete's to check, atomically.
func (f *Redis) HeldLeases(ctx context.Context, slave string, leases []Lease) (out []Lease, held []bool, err error) {
	out, held = make([]Lease, len(leases)), make([]bool, len(leases))
	idx := map[int][]int{}
	for i, l := range leases {
		if l.Shard >= 0 && l.Shard < len(f.shards) {
			idx[l.Shard] = append(idx[l.Shard], i)
		}
	}
	for _, k := range sortedShards(idx) {
		sub := make([]Lease, len(idx[k]))
		for j, i := range idx[k] {
			sub[j] = leases[i]
		}
		subOut, subHeld := make([]Lease, len(sub)), make([]bool, len(sub))
		if err := f.shards[k].heldLeases(ctx, slave, sub, subOut, subHeld); err != nil {
			return nil, nil, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			out[i], held[i] = subOut[j], subHeld[j]
		}
	}
	return out, held, nil
}

// Leave implements Registry: the slave gives back its leases on every
// shard; shard 0 records the leave.
func (f *Redis) Leave(ctx context.Context, slave, detail string) error {
	for k := len(f.shards) - 1; k >= 0; k-- {
		if err := f.shards[k].leave(ctx, slave, detail, k == 0); err != nil {
			return err
		}
	}
	return nil
}

// RecoverSlave implements Supervisor: the slave's leases on every shard
// are taken back; shard 0 records its death.
func (f *Redis) RecoverSlave(ctx context.Context, slave string) (int, error) {
	return f.retireAll(ctx, slave, "death", "heartbeats missed")
}

// RetireGone drops a slave that left from every shard's registry (see
// shard.RetireGone).
func (f *Redis) RetireGone(ctx context.Context, slave string) (int, error) {
	return f.retireAll(ctx, slave, "gone", "heartbeats missed")
}

func (f *Redis) retireAll(ctx context.Context, slave, kind, detail string) (int, error) {
	total := 0
	for k := len(f.shards) - 1; k >= 0; k-- {
		n, err := f.shards[k].retire(ctx, slave, kind, detail, k == 0)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// RecoverExpired implements Supervisor over every shard.
func (f *Redis) RecoverExpired(ctx context.Context, limit int) (int, error) {
	return f.RecoverExpiredShards(ctx, limit, nil)
}

// RecoverExpiredShards is RecoverExpired on the shards given (nil: all),
// the ones a master owns.
func (f *Redis) RecoverExpiredShards(ctx context.Context, limit int, shards []int) (int, error) {
	if shards == nil {
		shards = f.all()
	}
	total := 0
	for _, k := range shards {
		n, err := f.shards[k].RecoverExpired(ctx, limit)
		total += n
		if n > 0 {
			f.woke(k)
		}
		if err != nil {
			return total, fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return total, nil
}

func (f *Redis) all() []int {
	out := make([]int, len(f.shards))
	for k := range out {
		out[k] = k
	}
	return out
}
