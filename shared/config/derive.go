package config

// What the config gives its users beyond its fields: the Redis client
// options, the logger, the slave's memory limit and profile, the proxy
// pool names.

import (
	"io"
	"log/slog"
	"sort"

	"github.com/redis/go-redis/v9"
)

// SmallMemoryLimit is the Go memory limit of the "small" slave profile.
const SmallMemoryLimit = 64 << 20

// SlaveMemoryLimit is the soft Go memory limit bin/slave sets (unless
// GOMEMLIMIT is set), 0 for none: slave.memory_limit, or with 0 (auto)
// 24 MiB, plus fetch.memory_body_bytes per fetch in flight (64 KiB by
// default), plus 32 MiB per render tab when rendering is on (a rendered
// page's DOM is held in the slave); at least SmallMemoryLimit with the
// small profile. It keeps the heap from overshooting: a slave at 64
// fetches in flight without rendering gets 28 MiB, which keeps its RSS
// under 40 MiB on a 100-host crawl at the same CPU per page (26 MiB cost
// ~10% more CPU, make bench). It is soft: past it the Go GC works harder
// (at most half the CPU), nothing fails. The automatic limit is a floor:
// bin/slave raises it to stay a margin above the live heap while that
// needs more (slave/memlimit: a broad crawl's DNS entries, sessions and
// connections).
func (c *Config) SlaveMemoryLimit() int64 {
	s := c.SlaveProfile()
	switch {
	case s.Slave.MemoryLimit > 0:
		return s.Slave.MemoryLimit
	case s.Slave.MemoryLimit < 0:
		return 0
	}
	limit := int64(24<<20) + int64(s.Slave.Concurrency)*s.Fetch.MemoryBodyBytes
	if s.Render.Enabled {
		limit += int64(s.Render.Tabs) * (32 << 20)
	}
	if s.Slave.Profile == "small" {
		limit = max(limit, SmallMemoryLimit)
	}
	return limit
}

// SlaveProfile returns the config a slave runs with: c with slave.profile
// applied ("small": at most 16 fetches in flight, bodies over 32 KiB on
// disk, rendering off). c itself is not changed.
func (c *Config) SlaveProfile() *Config {
	out := *c
	if c.Slave.Profile == "small" {
		out.Slave.Concurrency = min(out.Slave.Concurrency, 16)
		out.Fetch.MemoryBodyBytes = min(out.Fetch.MemoryBodyBytes, 32<<10)
		out.Render.Enabled = false
		out.Slave.LinkCache = min(out.Slave.LinkCache, 1<<14)
	}
	return &out
}

// ProxyPoolNames lists the names of fetch.proxy_pools, sorted.
func (c *Config) ProxyPoolNames() []string {
	names := make([]string, 0, len(c.Fetch.ProxyPools))
	for name := range c.Fetch.ProxyPools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// RedisOptions parses redis.url into client options with the redis.tls_*
// settings applied: the address, credentials and TLS of the clients that
// shared/redisconn makes. The URL must have the redis or rediss scheme.
// An error is an *Error naming the key; it never repeats the URL, which
// may hold a password. With redis.cluster it only checks the URL and
// returns empty options: see RedisClusterOptions.
func (c *Config) RedisOptions() (*redis.Options, error) {
	u, err := c.redisURL()
	if err != nil {
		return nil, err
	}
	if c.Redis.Cluster {
		if _, err := c.RedisClusterOptions(); err != nil {
			return nil, err
		}
		return &redis.Options{}, nil
	}
	opt, err := redis.ParseURL(c.Redis.URL)
	if err != nil {
		return nil, &Error{Key: "redis.url", Msg: "invalid redis url", Err: stripURL(err)}
	}
	t, err := c.redisTLS(u.Scheme)
	if err != nil {
		return nil, err
	}
	opt.TLSConfig = t
	return opt, nil
}

// SlogLevel is log.level as a slog.Level (info for an unknown level, which
// Validate rejects).
func (c *Config) SlogLevel() slog.Level {
	switch c.Log.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// NewLogger returns a log/slog logger writing to w in log.format at
// log.level.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
