// Leases extended, held, given back and recovered: the crawl (Redis) sends
// each lease to its shard; a shard (shard) runs the library's functions.

package frontier

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Extend implements Frontier.
func (f *Redis) Extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	if len(f.shards) == 1 {
		return f.shards[0].extend(ctx, slave, leases)
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
		h, err := f.shards[k].extend(ctx, slave, sub)
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
		n, err := f.shards[k].recoverExpired(ctx, limit)
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

// extend is Redis.Extend on one shard: the library's function extend (lease.lua)
// pushes the deadlines of the leases this slave still holds to now + the
// crawl's lease duration, maxCompletions leases a call.
func (f *shard) extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	held := make([]bool, 0, len(leases))
	for len(leases) > 0 {
		n := min(len(leases), maxCompletions)
		args := []any{slave, n}
		for _, l := range leases[:n] {
			args = append(args, l.URL, l.Token)
		}
		arr, err := f.callSlice(ctx, "extend", args...)
		if err != nil {
			return held, wrap("extend leases", err)
		}
		if len(arr) != n {
			return held, fmt.Errorf("extend leases: %d values for %d leases", len(arr), n)
		}
		for _, v := range arr {
			i, _ := toInt(v)
			held = append(held, i == 1)
		}
		leases = leases[n:]
	}
	if len(held) == 0 {
		return nil, nil
	}
	return held, nil
}

// heldLeases reads the lease data of slave for leases (their URL and
// token as the slave names them) in one HMGET: out[i] is the lease as the
// frontier recorded it when it leased it (task, priority, leased at; no
// deadline), held[i] whether slave holds it with that token now.
func (f *shard) heldLeases(ctx context.Context, slave string, leases []Lease, out []Lease, held []bool) error {
	if len(leases) == 0 {
		return nil
	}
	urls := make([]string, len(leases))
	for i, l := range leases {
		urls[i] = l.URL
	}
	vals, err := f.rdb.HMGet(ctx, f.keys.SlaveLeaseData(slave), urls...).Result()
	if err != nil {
		return wrap("read leases", err)
	}
	for i, v := range vals {
		data, _ := v.(string)
		// slave \t token \t leased_at \t host \t prio \t task (claim.lua)
		parts := strings.SplitN(data, "\t", 6)
		if len(parts) != 6 || parts[0] != slave || parts[1] != strconv.FormatInt(leases[i].Token, 10) {
			continue
		}
		l, err := f.leaseOf(slave, []any{parts[3], parts[4], parts[5], parts[1], parts[2], int64(0), ""})
		if err != nil || l.URL != leases[i].URL {
			continue
		}
		out[i], held[i] = l, true
	}
	return nil
}

// recoverExpired is Redis.RecoverExpired on one shard: the library's function
// recover_expired (lease.lua) takes back the leases whose deadline passed,
// at most limit, in the lease zset of every registered slave, walking the
// registry recoverPage slaves a call.
func (f *shard) recoverExpired(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	limit = min(limit, maxRecover)
	total, from := 0, int64(0)
	for {
		arr, err := f.callSlice(ctx, "recover_expired", limit-total, from)
		if err != nil {
			return total, wrap("recover expired leases", err)
		}
		if len(arr) != 2 {
			return total, fmt.Errorf("recover expired leases: %d values", len(arr))
		}
		n, _ := toInt(arr[0])
		next, _ := toInt(arr[1])
		total += int(n)
		if next == 0 || total >= limit {
			return total, nil
		}
		from = next
	}
}

// recoverSlave is Redis.RecoverSlave on one shard.
func (f *shard) recoverSlave(ctx context.Context, slave string) (int, error) {
	return f.retire(ctx, slave, "death", "heartbeats missed", true)
}

// retire runs the library's function retire (lease.lua), which takes back
// every lease the slave holds and removes it from the registry; record
// says whether this shard records the
// slave's death or leave (shard 0 of a sharded crawl; the others record
// only the leases they take back).
func (f *shard) retire(ctx context.Context, slave, kind, detail string, record bool) (int, error) {
	n, err := f.callInt(ctx, "retire", slave, kind, truncate(detail, maxReasonBytes), boolArg(record))
	if err != nil {
		return 0, wrap("retire slave "+slave, err)
	}
	return int(n), nil
}

const (
	// Busy: work is queued, in flight or waiting for retry.
	Busy FinishState = iota
	// Finished: the crawl is finished.
	Finished
	// Quiet: nothing is left, but not yet for the quiescence window.
	Quiet
)
