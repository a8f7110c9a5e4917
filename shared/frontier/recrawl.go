package frontier

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Incremental recrawls. A recrawl (Reseed) re-enqueues every page the
// crawl recorded, each with the validators its last fetch returned
// (Task.Revisit): the reseed script keeps them in the val hash of the URL's
// shard, url -> etag \t last_modified \t checksum, and the claim that
// leases the URL takes them back (HMGET, HDEL) and returns them with the
// lease, so a slave learns them with no extra round trip and sends a
// conditional request (If-None-Match, If-Modified-Since). A claim reads
// the hash only when it exists: a crawl with no recrawl queued pays one
// EXISTS per claim.
//
// The validators leave the hash when the URL is leased: a lease that
// comes back (retry, lost slave, release) is fetched again without them,
// unconditionally, and counted as a new page.
//
// A recrawl run is numbered: StartRecrawl bumps recrawl_run in shard 0's
// stats hash and stamps recrawl_at (Redis's clock, ms), which Stats
// reports, so the pages stored since then can be counted as unchanged,
// changed or new (the store's RecrawlCounts).

// Validators are what the last fetch of a page learned to recognise it:
// its ETag and Last-Modified headers and its 64-bit content checksum
// (events.Page.Checksum). Any of them may be empty; a non-nil *Validators
// still says the page was fetched before.
type Validators struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Checksum     string `json:"checksum,omitempty"`
}

// encodeValidators is the val hash's value of v: etag \t last_modified \t
// checksum, never "" (which says none); tabs and newlines in a header value
// become spaces.
func encodeValidators(v *Validators) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, s)
	}
	return clean(v.ETag) + "\t" + clean(v.LastModified) + "\t" + clean(v.Checksum)
}

// decodeValidators reads a val hash value (encodeValidators).
func decodeValidators(s string) *Validators {
	f := strings.SplitN(s, "\t", 3)
	for len(f) < 3 {
		f = append(f, "")
	}
	return &Validators{ETag: f[0], LastModified: f[1], Checksum: f[2]}
}

// appendValidators appends the reseed script's validators ARGV: one per
// task, "" for a task without.
func appendValidators(args []any, ts []Task) []any {
	for _, t := range ts {
		v := ""
		if t.Revisit != nil {
			v = encodeValidators(t.Revisit)
		}
		args = append(args, v)
	}
	return args
}

// Recrawl stats fields of shard 0's stats hash.
const (
	statRecrawlRun = "recrawl_run"
	statRecrawlAt  = "recrawl_at"
)

// StartRecrawl numbers a new recrawl run and stamps its start with Redis's
// clock; pages fetched from then on belong to it. It returns the run and
// its start.
func (f *Redis) StartRecrawl(ctx context.Context) (int64, time.Time, error) {
	now, err := f.shards[0].rdb.Time(ctx).Result()
	if err != nil {
		return 0, time.Time{}, wrap("start recrawl", err)
	}
	pipe := f.shards[0].rdb.TxPipeline()
	run := pipe.HIncrBy(ctx, f.shards[0].keys.Stats, statRecrawlRun, 1)
	pipe.HSet(ctx, f.shards[0].keys.Stats, statRecrawlAt, strconv.FormatInt(now.UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, time.Time{}, wrap("start recrawl", err)
	}
	return run.Val(), time.UnixMilli(now.UnixMilli()), nil
}
