package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
)

// TestRedisClusterFailoverOptions checks the failover settings apply
// unless redis.url sets them.
func TestRedisClusterFailoverOptions(t *testing.T) {
	type got struct {
		MaxRedirects, DialerRetries      int
		MinRetryBackoff, MaxRetryBackoff time.Duration
	}
	tests := []struct {
		name, url string
		want      got
	}{
		{"defaults", "redis://127.0.0.1:7000?addr=127.0.0.1:7001",
			got{clusterMaxRedirects, clusterDialerRetries, clusterMinRetryBackoff, clusterMaxRetryBackoff}},
		{"set in the url", "redis://127.0.0.1:7000?addr=127.0.0.1:7001&max_redirects=2&dialer_retries=3" +
			"&min_retry_backoff=5ms&max_retry_backoff=2s",
			got{2, 3, 5 * time.Millisecond, 2 * time.Second}},
		{"retries off in the url", "redis://127.0.0.1:7000?max_redirects=-1&min_retry_backoff=-1",
			got{-1, clusterDialerRetries, -1, clusterMaxRetryBackoff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			c.Redis.URL, c.Redis.Cluster = tt.url, true
			opt, err := ClusterOptions(&c)
			if err != nil {
				t.Fatal(err)
			}
			g := got{opt.MaxRedirects, opt.DialerRetries, opt.MinRetryBackoff, opt.MaxRetryBackoff}
			if d := cmp.Diff(tt.want, g); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
		})
	}
}

// TestNodeFailed checks which errors make the cluster client reload its
// slot map.
func TestNodeFailed(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: &net.DNSError{IsTimeout: true}}, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"CLUSTERDOWN", errors.New("CLUSTERDOWN The cluster is down"), true},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), false},
		{"script error", errors.New("ERR Error running script"), false},
		{"nil reply", redis.Nil, false},
		{"other", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	}
	for _, tt := range tests {
		if got := nodeFailed(tt.err); got != tt.want {
			t.Errorf("%s: nodeFailed(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
