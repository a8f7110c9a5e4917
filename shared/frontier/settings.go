package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A crawl's settings (strategy, politeness defaults, trap caps, dedup,
// attempts, scope, lease, the caps on what a slave reports) are one string
// in Keys.Settings of every shard, which the master writes when it opens
// the crawl and the functions read (base.lua: settings_of). No function
// takes them from its caller, so a slave cannot call with a looser scope,
// more attempts or a larger Bloom filter than the crawl's.
//
// The string is tab-separated, in settingNames' order; the last field
// lists crawl.allow_hosts separated by spaces ("*.example.com" for a host
// and the hosts below it).
var settingNames = []string{"strategy", "jitter_dist", "priority_x", "aopic_tax", "aopic_lambda_min",
	"max_pages_per_host", "max_query_variants", "host_concurrency", "delay_ms", "jitter", "dedup",
	"bloom_m", "bloom_k", "bloom_seg", "seen_load", "max_attempts", "scope_by_seeds", "lease_ms",
	"max_date_variants", "max_host_delay_ms", "max_backoff_ms", "max_depth", "allow_hosts"}

// settingsFields is the number of fields of the settings string.
var settingsFields = len(settingNames)

// Defaults of the caps on what a slave reports (Options.MaxHostDelay,
// MaxBackoff) when the options leave them 0.
const (
	defaultMaxHostDelay = time.Hour
	defaultMaxBackoff   = time.Hour
)

// settings returns the shard's settings string; load is its seen buckets'
// load (dedup.lua: LH).
func (f *shard) settings(load int) string {
	opt := f.opt
	return strings.Join([]string{opt.Strategy, opt.JitterDist, fmtFloat(opt.PriorityX), fmtFloat(opt.AOPICTax),
		fmtFloat(opt.AOPICLambdaMin), strconv.FormatInt(max(opt.MaxPagesPerHost, 0), 10),
		strconv.Itoa(max(opt.MaxQueryVariants, 0)), strconv.Itoa(opt.HostConcurrency),
		strconv.FormatInt(max(ms(opt.Delay), 0), 10), fmtFloat(max(opt.Jitter, 0)),
		opt.DedupMode, strconv.FormatUint(f.bloom.M, 10), strconv.Itoa(f.bloom.K), strconv.FormatUint(f.bloom.Seg, 10),
		strconv.Itoa(load), strconv.Itoa(opt.MaxAttempts), strconv.Itoa(boolArg(opt.ScopeBySeeds)),
		strconv.FormatInt(ms(opt.LeaseDuration), 10), strconv.Itoa(max(opt.MaxDateVariants, 0)),
		strconv.FormatInt(ms(opt.MaxHostDelay), 10), strconv.FormatInt(ms(opt.MaxBackoff), 10),
		strconv.Itoa(max(opt.MaxDepth, 0)), strings.Join(opt.AllowHosts, " ")}, "\t")
}

// putSettings makes the shard's settings the crawl's: a master writes
// them (and names the library it loaded in meta); a slave keeps the
// master's and reports which of its own differ, or, on a crawl no master
// opened yet, writes its own when its Redis user may (a trusted one).
func (f *shard) putSettings(ctx context.Context, want string) (differ []string, err error) {
	key := f.keys.Settings
	if f.opt.Slave == "" {
		pipe := f.rdb.TxPipeline()
		pipe.Set(ctx, key, want, 0)
		pipe.HSet(ctx, f.keys.Meta, metaLibrary, f.library().name)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap("write crawl settings", err)
		}
		return nil, nil
	}
	have, err := f.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		ok, serr := f.rdb.SetNX(ctx, key, want, 0).Result()
		if serr != nil {
			if strings.Contains(serr.Error(), "NOPERM") {
				return nil, fmt.Errorf("crawl %s has no settings yet: a master writes them when it opens the crawl; start bin/master run (or seed) first", f.opt.Crawl)
			}
			return nil, wrap("write crawl settings", serr)
		}
		if ok {
			return nil, nil
		}
		have, err = f.rdb.Get(ctx, key).Result()
	}
	if err != nil {
		return nil, wrap("read crawl settings", err)
	}
	return settingsDiff(have, want), nil
}

// settingsDiff names the settings in which want differs from have.
func settingsDiff(have, want string) []string {
	if have == want {
		return nil
	}
	h, w := strings.Split(have, "\t"), strings.Split(want, "\t")
	var out []string
	for i, name := range settingNames {
		if i >= len(h) || i >= len(w) || h[i] != w[i] {
			out = append(out, name)
		}
	}
	return out
}

// SettingsDiffer names the settings in which this slave's options differ
// from the crawl's, which its master wrote and the functions use (nil for
// a master, which writes its own).
func (f *Redis) SettingsDiffer() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range f.shards {
		for _, name := range s.differ {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}
