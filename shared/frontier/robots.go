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

// GetRobots implements the robots.txt store on the host's shard.
func (f *Redis) GetRobots(ctx context.Context, host string) (RobotsRecord, bool, error) {
	return f.hostShard(host).getRobots(ctx, host)
}

// PutRobots stores a robots.txt record on the host's shard.
func (f *Redis) PutRobots(ctx context.Context, host string, r RobotsRecord) error {
	return f.hostShard(host).putRobots(ctx, host, r)
}

// PutRobotsTTL is PutRobots with a TTL.
func (f *Redis) PutRobotsTTL(ctx context.Context, host string, r RobotsRecord, ttl time.Duration) error {
	return f.hostShard(host).putRobotsTTL(ctx, host, r, ttl)
}

// RobotsRecord is a host's robots.txt as fetched by one slave and shared
// with all of them, so a site sees one robots.txt request per crawl (per
// TTL), not one per slave.
type RobotsRecord struct {
	FetchedAt time.Time
	Status    int // HTTP status; 0 when the host was unreachable
	Body      []byte
	// TTL is how long Redis keeps the record: PutRobots uses it when
	// positive (e.g. a minute for a 5xx or an unreachable host), else
	// Options.RobotsTTL. GetRobots sets it to the time the record has left.
	TTL time.Duration
}

// maxRobotsBody is what RFC 9309 §2.5 asks a crawler to parse at least.
const maxRobotsBody = 500 << 10

// getRobots returns the stored robots.txt of a host, if any and not
// expired. It reads the record and its remaining TTL in one round trip.
func (f *shard) getRobots(ctx context.Context, host string) (RobotsRecord, bool, error) {
	key := f.keys.RobotsHost(host)
	pipe := f.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	pttl := pipe.PTTL(ctx, key)
	_, err := pipe.Exec(ctx)
	if errors.Is(err, redis.Nil) {
		return RobotsRecord{}, false, nil
	}
	if err != nil {
		return RobotsRecord{}, false, wrap("get robots.txt", err)
	}
	parts := strings.SplitN(get.Val(), "\t", 3)
	if len(parts) != 3 {
		return RobotsRecord{}, false, fmt.Errorf("get robots.txt of %s: malformed record", host)
	}
	at, err1 := strconv.ParseInt(parts[0], 10, 64)
	st, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return RobotsRecord{}, false, fmt.Errorf("get robots.txt of %s: %w", host, err)
	}
	rec := RobotsRecord{FetchedAt: time.UnixMilli(at), Status: st, Body: []byte(parts[2])}
	if ttl := pttl.Val(); ttl > 0 {
		rec.TTL = ttl
	}
	return rec, true, nil
}

// putRobots stores a host's robots.txt (the body is capped at 500 KiB) for
// r.TTL, or Options.RobotsTTL when r.TTL is not positive.
func (f *shard) putRobots(ctx context.Context, host string, r RobotsRecord) error {
	ttl := r.TTL
	if ttl <= 0 {
		ttl = f.opt.RobotsTTL
	}
	body := r.Body
	if len(body) > maxRobotsBody {
		body = body[:maxRobotsBody]
	}
	v := strconv.FormatInt(r.FetchedAt.UnixMilli(), 10) + "\t" + strconv.Itoa(r.Status) + "\t" + string(body)
	return wrap("put robots.txt", f.rdb.Set(ctx, f.keys.RobotsHost(host), v, ttl).Err())
}

// putRobotsTTL stores a host's robots.txt for ttl (Options.RobotsTTL when
// not positive).
func (f *shard) putRobotsTTL(ctx context.Context, host string, r RobotsRecord, ttl time.Duration) error {
	r.TTL = ttl
	return f.putRobots(ctx, host, r)
}
