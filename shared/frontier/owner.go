package frontier

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// Several masters split a sharded crawl's shards between them. A master
// serves a shard (its recoverer, its part of the sink; shard 0's owner also
// runs the monitor and the finisher) while it holds the shard's owner key,
// a lease with a TTL that it renews. Masters register in shard 0's masters
// set; each keeps at most its share, ceil(S / masters alive), giving back
// the rest, and takes shards nobody holds. A master that dies stops
// renewing: its shards are free after the TTL and the others take them.

// Own renews a master's shards and takes or gives back shards so that it
// holds its share (the library's functions masters and own: admin.lua); ttl is the lease (renew well within it). It returns the
// shards the master serves now (a crawl of one shard has one owner too, so
// two masters of it run one recoverer and one sink, and the other takes
// over when the first dies).
func (f *Redis) Own(ctx context.Context, master string, ttl time.Duration) ([]int, error) {
	alive64, err := f.shards[0].callInt(ctx, "masters", master, 3*ms(ttl))
	alive := int(alive64)
	if err != nil {
		return nil, wrap("own shards: register", err)
	}
	share := (len(f.shards) + max(alive, 1) - 1) / max(alive, 1)
	own := func(k int, want bool) (bool, error) {
		s := f.shards[k]
		v, err := s.callInt(ctx, "own", master, ms(ttl), boolArg(want))
		if err != nil {
			return false, wrap(fmt.Sprintf("own shard %d", k), err)
		}
		return v == 1, nil
	}
	var owned []int
	held := map[int]bool{}
	// keep what it holds, up to its share; give back the rest
	for k, s := range f.shards {
		cur, err := s.rdb.Get(ctx, s.keys.Owner).Result()
		if err != nil && err != redis.Nil {
			return nil, wrap(fmt.Sprintf("own shard %d", k), err)
		}
		if cur != master {
			continue
		}
		ok, err := own(k, len(owned) < share)
		if err != nil {
			return nil, err
		}
		if ok {
			owned = append(owned, k)
			held[k] = true
		}
	}
	// take free shards up to its share
	for k := range f.shards {
		if len(owned) >= share {
			break
		}
		if held[k] {
			continue
		}
		ok, err := own(k, true)
		if err != nil {
			return nil, err
		}
		if ok {
			owned = append(owned, k)
		}
	}
	sort.Ints(owned)
	return owned, nil
}

// Disown gives back every shard a master holds (a graceful stop).
func (f *Redis) Disown(ctx context.Context, master string) error {
	for k, s := range f.shards {
		if _, err := s.call(ctx, "own", master, 0, 0); err != nil {
			return wrap(fmt.Sprintf("disown shard %d", k), err)
		}
	}
	return wrap("disown", f.shards[0].rdb.ZRem(ctx, f.shards[0].keys.Masters, master).Err())
}
