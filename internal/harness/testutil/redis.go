package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CrawlName returns a crawl name no other test uses.
func CrawlName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// DeleteCrawl deletes every Redis key of a crawl (crawl:{name}:*, and the
// shards' crawl:{name:k}:*) that rdb's SCAN reaches (one node of a
// cluster).
func DeleteCrawl(ctx context.Context, rdb redis.UniversalClient, crawl string) error {
	return deleteMatch(ctx, rdb, CrawlKeyPattern(crawl))
}

func deleteMatch(ctx context.Context, rdb redis.UniversalClient, match string) error {
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 500 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) > 0 {
		return rdb.Del(ctx, keys...).Err()
	}
	return nil
}

// CommandStat is one command's INFO commandstats counters: its calls and
// the µs Redis spent in it (a script's include the commands it ran, which
// are counted under their own names too).
type CommandStat struct{ Calls, Usec int64 }

// CommandStats reads INFO commandstats, keyed by command name ("evalsha",
// "hset", "client|list", ...). It is server-wide: every client counts.
func CommandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]CommandStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]CommandStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CommandStat
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			} else if v, ok := strings.CutPrefix(kv, "usec="); ok {
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}
