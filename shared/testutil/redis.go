package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// CrawlName returns a crawl name no other test uses.
func CrawlName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// DeleteCrawl deletes every Redis key of a crawl (crawl:{name}:*).
func DeleteCrawl(ctx context.Context, rdb redis.UniversalClient, crawl string) error {
	iter := rdb.Scan(ctx, 0, "crawl:{"+crawl+"}:*", 1000).Iterator()
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
