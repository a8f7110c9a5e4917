package frontier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CrawlExists reports whether a crawl exists in Redis (its meta key,
// which its creation writes first): read only, so a command given a typo
// can refuse it without creating it.
func CrawlExists(ctx context.Context, rdb redis.UniversalClient, crawl string) (bool, error) {
	n, err := rdb.Exists(ctx, NewKeys(crawl).Meta).Result()
	if err != nil {
		return false, wrap("crawl exists", err)
	}
	return n > 0, nil
}

// Crawls lists the crawls in Redis, sorted: the names of the meta keys a
// SCAN of every primary finds (a crawl's other shards, whose tags hold a
// colon, are not crawls of their own). Read only.
func Crawls(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	match := NewKeys("*").Meta
	var mu sync.Mutex
	seen := map[string]bool{}
	err := scanAll(ctx, rdb, match, func(_ context.Context, _ *redis.Client, keys []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if name, ok := crawlOfMeta(k); ok {
				seen[name] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list crawls", err)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// crawlOfMeta is the crawl of a meta key crawl:{name}:meta, false for a
// shard's (crawl:{name:k}:meta) or another key.
func crawlOfMeta(key string) (string, bool) {
	k := NewKeys("\x00")
	prefix, suffix, _ := strings.Cut(k.Meta, "\x00")
	name, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, suffix)
	if !ok || !ValidName(name) {
		return "", false
	}
	return name, true
}

// scanAll SCANs every primary for keys matching match and hands them to fn
// in batches of at most 500, with the node that holds them.
func scanAll(ctx context.Context, rdb redis.UniversalClient, match string, fn func(context.Context, *redis.Client, []string) error) error {
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		var keys []string
		for it.Next(ctx) {
			if keys = append(keys, it.Val()); len(keys) == 500 {
				if err := fn(ctx, c, keys); err != nil {
					return err
				}
				keys = keys[:0]
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		if len(keys) > 0 {
			return fn(ctx, c, keys)
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return scan(ctx, c)
	}
	return fmt.Errorf("a %T cannot scan", rdb)
}

// PeekSnapshot reads an existing crawl's snapshot without opening it:
// nothing is created and its settings are left as its master wrote them
// (NewRedis writes this process's). Shard 0's only: a sharded crawl's other
// shards are not added. The dashboard lists the crawls its master does not
// run with it.
func PeekSnapshot(ctx context.Context, rdb redis.UniversalClient, crawl string) (Snapshot, error) {
	if !ValidName(crawl) {
		return Snapshot{}, fmt.Errorf("peek crawl: invalid name %q", crawl)
	}
	k := NewKeys(crawl)
	s := &shard{rdb: rdb, opt: Options{Crawl: crawl}, keys: k, allKeys: k.all()}
	return s.readSnapshot(ctx)
}
