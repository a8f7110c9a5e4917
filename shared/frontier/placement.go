package frontier

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/hashslot"
)

// Shard placement. Shard 0 of a crawl is always crawl:{name}:… (its
// crawl-wide keys and every crawl of one shard keep their names); shard
// k > 0 lives under a hash tag of its own, name:k by default. On a Redis
// Cluster the slots of name:1, name:2, … fall on the masters as CRC16
// falls, often unevenly (6 shards on 3 masters: 0, 3 and 3 shards, say).
// So when a crawl is created on a cluster, each shard k > 0 gets the
// first tag of name:k, name:k-1, name:k-2, … whose slot is on a master
// holding the fewest of the crawl's shards so far: S shards on M masters
// spread within one shard a master, without resharding. The tags are
// fixed in shard 0's meta (shard_tags) with the shard count, and every
// process reads them there. A master added later serves no shard of a running crawl until
// slots move to it (redis-cli --cluster rebalance moves them, keys and
// all); crawls created after spread over it.

// maxPlacementTries bounds the tags tried for one shard.
const maxPlacementTries = 4096

// shardTag is shard k's default hash tag.
func shardTag(crawl string, k int) string { return crawl + ":" + strconv.Itoa(k) }

// placeShards returns the hash tags of shards 1..n-1 of a crawl being
// created: spread over the masters of a cluster, the defaults elsewhere.
func placeShards(ctx context.Context, rdb redis.UniversalClient, crawl string, n int) ([]string, error) {
	tags := make([]string, 0, max(n-1, 0))
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || n <= 1 {
		for k := 1; k < n; k++ {
			tags = append(tags, shardTag(crawl, k))
		}
		return tags, nil
	}
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, wrap("place shards: cluster slots", err)
	}
	owner := func(slot int) string {
		for _, r := range ranges {
			if slot >= int(r.Start) && slot <= int(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].ID
			}
		}
		return ""
	}
	count := map[string]int{}
	for _, r := range ranges {
		if len(r.Nodes) > 0 {
			count[r.Nodes[0].ID] += 0
		}
	}
	count[owner(hashslot.Of("{"+crawl+"}"))]++
	for k := 1; k < n; k++ {
		least := -1
		for _, c := range count {
			if least < 0 || c < least {
				least = c
			}
		}
		tag := shardTag(crawl, k)
		for x := 1; x < maxPlacementTries && count[owner(hashslot.Of("{"+tag+"}"))] > least; x++ {
			tag = shardTag(crawl, k) + "-" + strconv.Itoa(x)
		}
		count[owner(hashslot.Of("{"+tag+"}"))]++
		tags = append(tags, tag)
	}
	return tags, nil
}

// parseShardTags reads shard_tags of a crawl of n shards: its tags for
// shards 1..n-1.
func parseShardTags(crawl, field string, n int) ([]string, error) {
	if field == "" && n == 1 {
		return nil, nil
	}
	tags := strings.Split(field, ",")
	if len(tags) != n-1 {
		return nil, fmt.Errorf("crawl %q has %d shard tags for %d shards", crawl, len(tags), n)
	}
	for k, t := range tags {
		if !strings.HasPrefix(t, shardTag(crawl, k+1)) || !ValidName(strings.ReplaceAll(t, ":", ".")) {
			return nil, fmt.Errorf("crawl %q: shard %d has tag %q", crawl, k+1, t)
		}
	}
	return tags, nil
}
