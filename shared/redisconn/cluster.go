package redisconn

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster client settings for riding through a failover, applied by
// ClusterOptions unless redis.url sets them (max_redirects=,
// min_retry_backoff=, max_retry_backoff=, dialer_retries=).
//
// When a master dies, its replica is promoted about cluster-node-timeout
// plus an election (0.5–1.5s) later (TestRedisClusterFailover: ~2–3s with
// cluster-node-timeout 1s; Redis's default is 15s). Meanwhile calls for its
// slots fail with connection refused / EOF, and every node answers
// CLUSTERDOWN while those slots are uncovered. The client retries a call
// up to clusterMaxRedirects times with a backoff of clusterMinRetryBackoff
// doubling up to clusterMaxRetryBackoff (~1–2s in all); a longer outage
// reaches the caller as an error, which the frontier classifies as
// unavailable and its callers retry. A dial is tried once per attempt: the
// retry loop, not the dialer, waits for the failover, and a dead node
// costs one refused dial, not five. See newClusterClient for the slot map.
const (
	clusterMaxRedirects    = 6
	clusterMinRetryBackoff = 16 * time.Millisecond
	clusterMaxRetryBackoff = 512 * time.Millisecond
	clusterDialerRetries   = 1
)

// applyClusterFailover sets the failover settings redis.url leaves unset.
func applyClusterFailover(opt *redis.ClusterOptions) {
	if opt.MaxRedirects == 0 {
		opt.MaxRedirects = clusterMaxRedirects
	}
	if opt.MinRetryBackoff == 0 {
		opt.MinRetryBackoff = clusterMinRetryBackoff
	}
	if opt.MaxRetryBackoff == 0 {
		opt.MaxRetryBackoff = clusterMaxRetryBackoff
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = clusterDialerRetries
	}
}

// newClusterClient returns a Cluster client that reloads its slot map when
// a node fails. go-redis (v9.23) reloads it on MOVED, ASK and READONLY
// only, or when it is 60s old: after a master dies, a client that never
// meets a MOVED keeps dialing the dead address until then, long after the
// replica took over (TestRedisClusterFailover). The hook asks for a reload
// (CLUSTER SLOTS from one node, in the background; go-redis runs at most
// one at a time, 200ms apart) on each connection failure or CLUSTERDOWN,
// so the client follows the promotion within ~200ms of it.
func newClusterClient(opt *redis.ClusterOptions) *redis.ClusterClient {
	cc := redis.NewClusterClient(opt)
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnNodeFailure{cc}) })
	return cc
}

// reloadOnNodeFailure is a hook on each node's client: see
// newClusterClient.
type reloadOnNodeFailure struct{ cc *redis.ClusterClient }

func (h reloadOnNodeFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnNodeFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if nodeFailed(err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnNodeFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if nodeFailed(err) {
			h.cc.ReloadState(ctx)
		}
		return err
	}
}

// nodeFailed reports whether err says the node is down or the cluster's
// slot map is changing: a refused, reset or timed-out connection, an
// unexpected end of stream, or CLUSTERDOWN. A canceled context is the
// caller's doing and does not count.
func nodeFailed(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	return strings.HasPrefix(err.Error(), "CLUSTERDOWN")
}
