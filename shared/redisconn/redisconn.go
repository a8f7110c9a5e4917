// Package redisconn makes the Redis clients of both binaries from the
// config: a single node or a Redis Cluster client, with a dialer whose
// errors say what to check (a certificate that does not verify, a TLS
// server dialled in clear text) and, for a cluster, the settings and the
// hook that ride through a failover. shared/config parses and checks
// redis.url and redis.tls_*; this package turns them into connections.
package redisconn

import (
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
)

// New returns a client for redis.url: a single node, or a Redis Cluster
// client with redis.cluster (every crawl's keys share one hash tag, so a
// crawl lives in one slot) that reloads its slot map when a node fails
// (see newClusterClient). The caller closes it. An error is a
// *config.Error naming the key.
func New(cfg *config.Config) (redis.UniversalClient, error) {
	if cfg.Redis.Cluster {
		opt, err := ClusterOptions(cfg)
		if err != nil {
			return nil, err
		}
		return newClusterClient(opt), nil
	}
	opt, err := Options(cfg)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}

// Options are the single-node client options of cfg (config.RedisOptions)
// with this package's dialer. With redis.cluster they are empty: see
// ClusterOptions.
func Options(cfg *config.Config) (*redis.Options, error) {
	opt, err := cfg.RedisOptions()
	if err != nil || cfg.Redis.Cluster {
		return opt, err
	}
	opt.Dialer = dialer(&opt.DialTimeout, opt.TLSConfig)
	return opt, nil
}

// ClusterOptions are the Redis Cluster client options of cfg
// (config.RedisClusterOptions) with this package's dialer and the
// failover settings redis.url leaves unset (see clusterMaxRedirects).
func ClusterOptions(cfg *config.Config) (*redis.ClusterOptions, error) {
	opt, err := cfg.RedisClusterOptions()
	if err != nil {
		return nil, err
	}
	opt.Dialer = dialer(&opt.DialTimeout, opt.TLSConfig)
	applyClusterFailover(opt)
	return opt, nil
}
