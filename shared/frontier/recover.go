package frontier

import (
	"context"
	"fmt"
	"time"
)

// RecoverExpired implements Supervisor: the library's function
// recover_expired (lease.lua) takes back the leases whose deadline passed,
// at most limit, in the lease zset of every registered slave, walking the
// registry recoverPage slaves a call.
func (f *shard) RecoverExpired(ctx context.Context, limit int) (int, error) {
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

// RecoverSlave implements Supervisor.
func (f *shard) RecoverSlave(ctx context.Context, slave string) (int, error) {
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

// CheckFinished implements Supervisor: the library's function finish
// (finish.lua) decides whether the crawl is finished: nothing queued, in
// flight or waiting for retry, continuously for the quiescence window.
func (f *shard) CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	st, err := f.FinishCheck(ctx, quiescence)
	return st == Finished, err
}

// FinishState is what a finish check found (FinishCheck).
type FinishState int

const (
	// Busy: work is queued, in flight or waiting for retry.
	Busy FinishState = iota
	// Finished: the crawl is finished.
	Finished
	// Quiet: nothing is left, but not yet for the quiescence window.
	Quiet
)

// FinishCheck is CheckFinished that also tells a busy crawl from one in
// its quiescence window, so a finisher can check a busy crawl less often.
func (f *shard) FinishCheck(ctx context.Context, quiescence time.Duration) (FinishState, error) {
	n, err := f.callInt(ctx, "finish", ms(quiescence))
	if err != nil {
		return Busy, wrap("check finished", err)
	}
	return FinishState(n), nil
}
