package frontier

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// A crawl's limits (crawl.max_pages, max_items, max_duration: Scrapy's
// CLOSESPIDER_PAGECOUNT, ITEMCOUNT and TIMEOUT) live in shard 0's limits
// hash (Keys.Limits; the functions of lua/limits.lua), which exists only
// while the crawl has one. Every claim of a crawl that has one first takes
// its pages from the page limit (limit_take, one more call a claim, on
// shard 0 whatever shard the claim goes to) and gives back what it did not
// lease; the items of its completions are counted with the next take. So
// the crawl claims at most max_pages pages across every slave and shard,
// and a claim takes nothing once a limit is reached. The master keeps the
// time (LimitOver) and, once a limit is reached and no page is in flight,
// ends the crawl (EndByLimit). A slave learns that the crawl has limits
// when it opens it and with each heartbeat; the work API's slaves claim
// through the master's frontier. The limits are the frontier's, not
// Redis's: a direct slave's Redis user could claim past them (as it could
// ignore politeness), a slave of the work API cannot.

// Limits are the limits a master writes (SetLimits).
type Limits struct {
	// MaxPages and MaxItems end the crawl once its claims took that many
	// pages, or its pages gave that many items; 0 = none.
	MaxPages, MaxItems int64
	// Timed: a max_duration is set, which the master's clock keeps
	// (LimitOver).
	Timed bool
}

// Names of the limits, as LimitStats.EndedBy and the functions say them.
const (
	LimitMaxPages    = "max_pages"
	LimitMaxItems    = "max_items"
	LimitMaxDuration = "max_duration"
)

// LimitStats are a crawl's limits and their counts (Stats.Limits).
type LimitStats struct {
	MaxPages int64 `json:"max_pages,omitempty"`
	MaxItems int64 `json:"max_items,omitempty"`
	// Timed: a max_duration is set.
	Timed bool `json:"timed,omitempty"`
	// Pages are the pages claims took under the limits (the crawl's
	// pages before them included), Items the items counted.
	Pages int64 `json:"pages"`
	Items int64 `json:"items"`
	// Over names a limit the master's clock reached (max_duration);
	// EndedBy the limit that ended the crawl, "" while none has.
	Over    string `json:"over,omitempty"`
	EndedBy string `json:"ended_by,omitempty"`
}

// maxLimit bounds a limit and the counts limits_set starts from;
// maxLimitItems the items one limit_take counts.
const (
	maxLimit      int64 = 1_000_000_000_000_000
	maxLimitItems       = maxCompletions * maxEventsPerCompletion
)

// limitState is what a process knows of its crawl's limits (shard 0's).
type limitState struct {
	// on: the crawl has limits (its limits hash exists), read when the
	// crawl is opened, with each heartbeat and by SetLimits
	on atomic.Bool
	// items are the items of completions not counted yet, back the pages
	// to give back (the next take sends them)
	items, back atomic.Int64
}

// readLimited reads whether the crawl has limits.
func (f *Redis) readLimited(ctx context.Context) error {
	s := f.shards[0]
	n, err := s.rdb.Exists(ctx, s.keys.Limits).Result()
	if err != nil {
		return wrap("read limits", err)
	}
	f.lim.on.Store(n > 0)
	return nil
}

// SetLimits makes lim the crawl's limits (the master, when it opens the
// crawl: the library's function limits_set). pages and items are the
// crawl's pages and items so far, where its counts start when it had no
// limit. It returns the limit already reached ("" for none) and whether a
// crawl a limit had ended was reopened (its new limits no longer end it).
func (f *Redis) SetLimits(ctx context.Context, lim Limits, pages, items int64) (reached string, reopened bool, err error) {
	if lim.MaxPages < 0 || lim.MaxItems < 0 || lim.MaxPages > maxLimit || lim.MaxItems > maxLimit {
		return "", false, fmt.Errorf("set limits: max_pages %d, max_items %d: want 0 to %d", lim.MaxPages, lim.MaxItems, int64(maxLimit))
	}
	arr, err := f.shards[0].callSlice(ctx, "limits_set", lim.MaxPages, lim.MaxItems, boolArg(lim.Timed),
		min(max(pages, 0), maxLimit), min(max(items, 0), maxLimit))
	if err != nil {
		return "", false, wrap("set limits", err)
	}
	if len(arr) != 2 {
		return "", false, fmt.Errorf("set limits: %d values", len(arr))
	}
	reached, _ = arr[0].(string)
	n, _ := toInt(arr[1])
	f.lim.on.Store(lim.MaxPages > 0 || lim.MaxItems > 0 || lim.Timed)
	return reached, n == 1, nil
}

// LimitOver records that a limit the master keeps (LimitMaxDuration) is
// reached: no claim takes a page from then on.
func (f *Redis) LimitOver(ctx context.Context, name string) error {
	s := f.shards[0]
	return wrap("limit over", s.rdb.HSet(ctx, s.keys.Limits, "over", name).Err())
}

// LimitReached names the limit the crawl's counts reach, "" for none (or
// a crawl without limits); it sends the counts waiting (take).
func (f *Redis) LimitReached(ctx context.Context) (string, error) {
	_, reached, err := f.take(ctx, 0)
	return reached, err
}

// EndByLimit marks the crawl finished by the limit name (shard 0's finish
// mark, and ended in the limits hash): the master's finisher, once the
// limit is reached and no page is in flight.
func (f *Redis) EndByLimit(ctx context.Context, name string) error {
	s := f.shards[0]
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, s.keys.Finish, "finished", time.Now().UnixMilli())
	pipe.HSet(ctx, s.keys.Limits, "ended", name)
	_, err := pipe.Exec(ctx)
	return wrap("end by limit", err)
}

// limitStats reads the limits hash (nil without limits).
func limitStats(m map[string]string) *LimitStats {
	if len(m) == 0 {
		return nil
	}
	n := func(k string) int64 {
		v, _ := strconv.ParseInt(m[k], 10, 64)
		return v
	}
	return &LimitStats{MaxPages: n("max_pages"), MaxItems: n("max_items"), Timed: m["timed"] == "1",
		Pages: n("pages"), Items: n("items"), Over: m["over"], EndedBy: m["ended"]}
}

// take takes up to want pages from the crawl's limits, with the pages to
// give back and the items waiting to be counted (limit_take), and names
// the limit reached. Without limits it takes want at no call.
func (f *Redis) take(ctx context.Context, want int) (int, string, error) {
	if !f.lim.on.Load() {
		return max(want, 0), "", nil
	}
	back := min(f.lim.back.Swap(0), maxLimitItems)
	items := min(f.lim.items.Swap(0), maxLimitItems)
	arr, err := f.shards[0].callSlice(ctx, "limit_take", min(max(want, 0), maxClaim), back, items)
	if err == nil && len(arr) != 2 {
		err = fmt.Errorf("%d values", len(arr))
	}
	if err != nil {
		f.lim.back.Add(back)
		f.lim.items.Add(items)
		return 0, "", wrap("take pages from the limits", err)
	}
	n, _ := toInt(arr[0])
	reached, _ := arr[1].(string)
	return int(n), reached, nil
}

// countCompletions counts, for the next take, the items of the
// completions and the pages to give back: those of the completions
// without a page (a retry, a robots.txt refusal, a release). It reports
// whether there are pages to give back.
func (f *Redis) countCompletions(cs []Completion) bool {
	if !f.lim.on.Load() {
		return false
	}
	var items, back int64
	for _, c := range cs {
		page := false
		for _, e := range c.Events {
			switch e.Type {
			case events.TypePage:
				page = true
			case events.TypeItem:
				if c.Outcome == Done {
					items++
				}
			}
		}
		if !page {
			back++
		}
	}
	f.lim.items.Add(items)
	f.lim.back.Add(back)
	return back > 0
}

// giveBack sends the pages to give back now (with the items waiting): a
// completion sent without a claim, whose pages other slaves may take.
func (f *Redis) giveBack(ctx context.Context) {
	// one that fails stays to give back with the next take
	f.take(context.WithoutCancel(ctx), 0) //nolint:errcheck // see above
}

// limitClaim runs claim for at most max leases, cut to the pages the
// crawl's limits allow (take), and gives back the pages it took but did
// not lease. A claim cut to none runs with max 0 (completions still go)
// and says there is nothing to wait for (Wait -1).
func (f *Redis) limitClaim(ctx context.Context, max int, claim func(max int) (ClaimResult, error)) (ClaimResult, error) {
	if !f.lim.on.Load() || max <= 0 {
		return claim(max)
	}
	took, _, err := f.take(ctx, max)
	if err != nil {
		return ClaimResult{}, err
	}
	res, err := claim(took)
	if took == 0 {
		res.Wait, res.Busy = -1, false
	}
	if unused := took - len(res.Leases); unused > 0 {
		f.lim.back.Add(int64(unused))
		f.giveBack(ctx)
	}
	return res, err
}
