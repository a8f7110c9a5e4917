package frontier

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// CheckFinished implements Supervisor. With several shards it is a double
// collect: every shard's (idle, work counter) is read, then read again; the
// crawl is idle at the moment between the two reads when every shard was
// idle both times and no counter moved (work added anywhere bumps its
// shard's counter, and a link in transit holds its page's lease, so its
// source shard is not idle). It is finished after staying idle, with the
// same counters, for the quiescence window.
func (f *Redis) CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	st, err := f.FinishCheck(ctx, quiescence)
	return st == Finished, err
}

// FinishCheck is CheckFinished that also tells a busy crawl from one in
// its quiescence window (shard.FinishCheck).
func (f *Redis) FinishCheck(ctx context.Context, quiescence time.Duration) (FinishState, error) {
	if len(f.shards) == 1 {
		return f.shards[0].finishCheck(ctx, quiescence)
	}
	collect := func() (bool, string, error) {
		idle, sig := true, ""
		for k, s := range f.shards {
			i, seq, err := s.idle(ctx)
			if err != nil {
				return false, "", fmt.Errorf("check finished: shard %d: %w", k, err)
			}
			idle = idle && i
			sig += strconv.FormatInt(seq, 10) + ","
		}
		return idle, sig, nil
	}
	idle1, sig1, err := collect()
	if err != nil {
		return Busy, err
	}
	idle, sig := false, ""
	if idle1 {
		idle2, sig2, err := collect()
		if err != nil {
			return Busy, err
		}
		idle, sig = idle2 && sig2 == sig1, sig2
	}
	n, err := f.shards[0].callInt(ctx, "finish_sharded", boolArg(idle), sig, ms(quiescence))
	if err != nil {
		return Busy, wrap("check finished", err)
	}
	return FinishState(n), nil
}

// idle reads whether a shard has nothing queued, in flight or waiting for
// retry, and its work counter (the library's function idle: finish.lua).
func (f *shard) idle(ctx context.Context) (bool, int64, error) {
	arr, err := f.callSlice(ctx, "idle")
	if err != nil {
		return false, 0, wrap("idle", err)
	}
	if len(arr) != 2 {
		return false, 0, fmt.Errorf("idle: %d values", len(arr))
	}
	i, _ := toInt(arr[0])
	seq, _ := toInt(arr[1])
	return i == 1, seq, nil
}

// checkFinished is Redis.CheckFinished on one shard: the library's function finish
// (finish.lua) decides whether the crawl is finished: nothing queued, in
// flight or waiting for retry, continuously for the quiescence window.
func (f *shard) checkFinished(ctx context.Context, quiescence time.Duration) (bool, error) {
	st, err := f.finishCheck(ctx, quiescence)
	return st == Finished, err
}

// FinishState is what a finish check found (FinishCheck).
type FinishState int

// finishCheck is CheckFinished that also tells a busy crawl from one in
// its quiescence window, so a finisher can check a busy crawl less often.
func (f *shard) finishCheck(ctx context.Context, quiescence time.Duration) (FinishState, error) {
	n, err := f.callInt(ctx, "finish", ms(quiescence))
	if err != nil {
		return Busy, wrap("check finished", err)
	}
	return FinishState(n), nil
}
