package frontier

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/hashslot"
)

// DeleteCrawl deletes every Redis key of a crawl, every shard's, on every
// primary of a cluster (DropCrawl). The crawl must not be running.
func DeleteCrawl(ctx context.Context, rdb redis.UniversalClient, crawl string) error {
	_, err := DropCrawl(ctx, rdb, crawl)
	return err
}

// DropCrawl deletes every Redis key of a crawl, those of each of its
// shards too (CrawlPattern), SCANning every primary of a cluster, and
// returns how many it deleted. A key written meanwhile by a process still
// running the crawl may be missed: a crawl is dropped once it stopped.
func DropCrawl(ctx context.Context, rdb redis.UniversalClient, crawl string) (int64, error) {
	if !ValidName(crawl) {
		return 0, fmt.Errorf("drop crawl: invalid name %q", crawl)
	}
	var n atomic.Int64
	err := scanAll(ctx, rdb, CrawlPattern(crawl), func(ctx context.Context, c *redis.Client, keys []string) error {
		// a multi-key command on a cluster takes the keys of one slot:
		// one UNLINK per shard's hash tag
		bySlot := map[int][]string{}
		for _, k := range keys {
			slot := hashslot.Of(k)
			bySlot[slot] = append(bySlot[slot], k)
		}
		pipe := c.Pipeline()
		cmds := make([]*redis.IntCmd, 0, len(bySlot))
		for _, ks := range bySlot {
			cmds = append(cmds, pipe.Unlink(ctx, ks...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for _, c := range cmds {
			n.Add(c.Val())
		}
		return nil
	})
	if err != nil {
		return n.Load(), fmt.Errorf("drop crawl %s: %w", crawl, err)
	}
	return n.Load(), nil
}
