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

// RobotsRecord is a host's robots.txt as fetched by one slave and shared
// with all of them, so a site sees one robots.txt request per crawl (per
// TTL), not one per slave.
type RobotsRecord struct {
	FetchedAt time.Time
	Status    int // HTTP status; 0 when the host was unreachable
	Body      []byte
}

// maxRobotsBody is what RFC 9309 §2.5 asks a crawler to parse at least.
const maxRobotsBody = 500 << 10

// GetRobots returns the stored robots.txt of a host, if any.
func (f *Redis) GetRobots(ctx context.Context, host string) (RobotsRecord, bool, error) {
	raw, err := f.rdb.HGet(ctx, f.keys.Robots, host).Result()
	if errors.Is(err, redis.Nil) {
		return RobotsRecord{}, false, nil
	}
	if err != nil {
		return RobotsRecord{}, false, wrap("get robots.txt", err)
	}
	parts := strings.SplitN(raw, "\t", 3)
	if len(parts) != 3 {
		return RobotsRecord{}, false, fmt.Errorf("get robots.txt of %s: malformed record", host)
	}
	at, err1 := strconv.ParseInt(parts[0], 10, 64)
	st, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return RobotsRecord{}, false, fmt.Errorf("get robots.txt of %s: %w", host, err)
	}
	return RobotsRecord{FetchedAt: time.UnixMilli(at), Status: st, Body: []byte(parts[2])}, true, nil
}

// PutRobots stores a host's robots.txt (the body is capped at 500 KiB).
func (f *Redis) PutRobots(ctx context.Context, host string, r RobotsRecord) error {
	body := r.Body
	if len(body) > maxRobotsBody {
		body = body[:maxRobotsBody]
	}
	v := strconv.FormatInt(r.FetchedAt.UnixMilli(), 10) + "\t" + strconv.Itoa(r.Status) + "\t" + string(body)
	return wrap("put robots.txt", f.rdb.HSet(ctx, f.keys.Robots, host, v).Err())
}
