package benchsuite

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// CountHook counts what a go-redis client sends: every command (a
// pipeline counts each command it carries) and, among them, the scripts,
// the round-trip cost the frontier is designed to keep low (Redis's own
// commandstats also count the commands scripts call). A NOSCRIPT evalsha
// retried as eval is one round trip. Add it with client.AddHook.
type CountHook struct{ Cmds, Scripts atomic.Int64 }

func (h *CountHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *CountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *CountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}
func (h *CountHook) count(c redis.Cmder) {
	name := c.Name()
	if name == "fcall" || name == "fcall_ro" {
		h.Scripts.Add(1)
	}
	h.Cmds.Add(1)
}

// redisInfo is what the suite reads from INFO.
type redisInfo struct {
	calls      int64 // sum of commandstats calls (commands run inside scripts included)
	scripts    int64 // fcall + fcall_ro calls (the frontier's functions), and evalsha + eval
	cpu        float64
	usedMemory int64
	luaFnBytes int64 // used_memory_vm_functions: the function libraries' Lua heap
}

func readInfo(ctx context.Context, rdb redis.UniversalClient) (redisInfo, error) {
	s, err := rdb.Info(ctx, "commandstats", "cpu", "memory").Result()
	if err != nil {
		return redisInfo{}, err
	}
	return parseInfo(s), nil
}

// RedisCPUCalls returns Redis's CPU seconds (used_cpu_sys + used_cpu_user)
// and the sum of its commandstats calls so far: server-wide, for a
// harness that measures another crawler on the same Redis (peerbench).
func RedisCPUCalls(ctx context.Context, rdb redis.UniversalClient) (cpu float64, calls int64, err error) {
	ri, err := readInfo(ctx, rdb)
	if err != nil {
		return 0, 0, fmt.Errorf("redis INFO: %w", err)
	}
	return ri.cpu, ri.calls, nil
}

// parseInfo reads INFO's commandstats, cpu and memory sections.
func parseInfo(s string) redisInfo {
	var ri redisInfo
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			for f := range strings.SplitSeq(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					c, _ := strconv.ParseInt(n, 10, 64)
					ri.calls += c
					switch k {
					case "cmdstat_fcall", "cmdstat_fcall_ro", "cmdstat_evalsha", "cmdstat_eval":
						ri.scripts += c
					}
				}
			}
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			ri.cpu += f
		case k == "used_memory":
			ri.usedMemory, _ = strconv.ParseInt(v, 10, 64)
		case k == "used_memory_vm_functions":
			ri.luaFnBytes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return ri
}

// seenMemory estimates the bytes of the crawl's seen-URL buckets: the
// MEMORY USAGE of up to MaxSeenSample bucket keys, scaled to all of them.
func seenMemory(ctx context.Context, rdb redis.UniversalClient, crawl string) (bytes int64, buckets int, err error) {
	keys := frontier.NewKeys(crawl)
	iter := rdb.Scan(ctx, 0, keys.Prefix+"seen:*", 1000).Iterator()
	var sampled, sum int64
	for iter.Next(ctx) {
		buckets++
		if sampled < MaxSeenSample {
			n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				return 0, 0, err
			}
			sum += n
			sampled++
		}
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	if sampled == 0 {
		return 0, 0, nil
	}
	return sum * int64(buckets) / sampled, buckets, nil
}

// queueMemory sums the MEMORY USAGE and length of the crawl's per-host
// queue lists (bfs and dfs strategies) and of its fresh hash (the hosts
// with one queued task).
func queueMemory(ctx context.Context, rdb redis.UniversalClient, crawl string, hosts []string) (bytes, tasks int64, err error) {
	keys := frontier.NewKeys(crawl)
	if n, err := rdb.HLen(ctx, keys.Fresh).Result(); err != nil {
		return 0, 0, err
	} else if n > 0 {
		m, err := rdb.MemoryUsage(ctx, keys.Fresh, 0).Result()
		if err != nil && err != redis.Nil {
			return 0, 0, err
		}
		bytes += m
		tasks += n
	}
	for _, h := range hosts {
		prios, err := rdb.ZRange(ctx, keys.Prios(h), 0, -1).Result()
		if err != nil {
			return 0, 0, err
		}
		for _, p := range prios {
			prio, _ := strconv.ParseInt(p, 10, 64)
			k := keys.Queue(h, prio)
			n, err := rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil && err != redis.Nil {
				return 0, 0, err
			}
			l, err := rdb.LLen(ctx, k).Result()
			if err != nil {
				return 0, 0, err
			}
			bytes += n
			tasks += l
		}
	}
	return bytes, tasks, nil
}

// hostKeys returns the frontier's host keys of the site's hosts.
func hostKeys(hostURLs []string) []string {
	var out []string
	for _, raw := range hostURLs {
		if u, err := url.Parse(raw); err == nil {
			out = append(out, urlx.HostKey(u))
		}
	}
	return out
}
