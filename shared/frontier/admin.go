package frontier

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DeleteCrawl deletes every Redis key of a crawl (crawl:{name}:*), on every
// master node of a cluster. The crawl must not be running.
func DeleteCrawl(ctx context.Context, rdb redis.UniversalClient, crawl string) error {
	match := NewKeys(crawl).Prefix + "*"
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 500 {
				if err := c.Del(ctx, keys...).Err(); err != nil {
					return err
				}
				keys = keys[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(keys) > 0 {
			return c.Del(ctx, keys...).Err()
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	} else {
		err = del(ctx, rdb)
	}
	if err != nil {
		return fmt.Errorf("delete crawl %s: %w", crawl, err)
	}
	return nil
}
