package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testcert"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
)

// TestRedisTLS runs clients built from the config against a real
// TLS-only redis-server (no plain port) that requires a client
// certificate, with a server certificate for the name redis.test only.
func TestRedisTLS(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "redis.test")
	addr := startTLSRedis(t, certs, "yes", false)
	withClient := func(c *config.Config) {
		c.Redis.TLSCertFile, c.Redis.TLSKeyFile = certs.ClientCert, certs.ClientKey
	}
	tests := []struct {
		name    string
		mutate  func(c *config.Config)
		wantErr []string // "" = works
	}{
		{"right CA, server name and client certificate", func(c *config.Config) {
			c.Redis.TLSCAFile, c.Redis.TLSServerName = certs.CA, "redis.test"
			withClient(c)
		}, nil},
		{"wrong CA", func(c *config.Config) {
			c.Redis.TLSCAFile, c.Redis.TLSServerName = certs.OtherCA, "redis.test"
			withClient(c)
		}, []string{"redis " + addr, "certificate verification failed", "redis.tls_ca_file"}},
		{"system roots", func(c *config.Config) {
			c.Redis.TLSServerName = "redis.test"
			withClient(c)
		}, []string{"redis " + addr, "certificate verification failed"}},
		{"server name mismatch", func(c *config.Config) {
			c.Redis.TLSCAFile = certs.CA
			withClient(c)
		}, []string{"redis " + addr, "certificate verification failed", "redis.tls_server_name"}},
		{"client certificate missing", func(c *config.Config) {
			c.Redis.TLSCAFile, c.Redis.TLSServerName = certs.CA, "redis.test"
		}, []string{"redis " + addr, "client certificate", "redis.tls_cert_file"}},
		{"plain client against the TLS port", func(c *config.Config) {
			c.Redis.URL = "redis://" + addr + "/0"
		}, []string{"redis " + addr, "is the server TLS-only? use rediss://"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			c.Redis.URL = "rediss://" + addr + "/0"
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			err := pingAndScript(t, &c)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ping and script: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ping and script worked, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestRedisClusterTLS runs a cluster client from the config against a
// one-node Redis Cluster on TLS only (tls-cluster yes).
func TestRedisClusterTLS(t *testing.T) {
	certs := testcert.Write(t, t.TempDir())
	addr := startTLSRedis(t, certs, "optional", true)
	c := config.Default()
	c.Redis.Cluster = true
	c.Redis.URL = "rediss://" + addr
	c.Redis.TLSCAFile = certs.CA
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := pingAndScript(t, &c); err != nil {
		t.Fatalf("cluster over TLS: %v", err)
	}
	c.Redis.TLSCAFile = certs.OtherCA
	err := pingAndScript(t, &c)
	if err == nil || !strings.Contains(err.Error(), "certificate verification failed") {
		t.Fatalf("cluster with the wrong CA: %v, want a certificate verification error", err)
	}
}

// pingAndScript pings through a client from c and runs a script that
// writes and reads a key.
func pingAndScript(t *testing.T, c *config.Config) error {
	t.Helper()
	rdb, err := New(c)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	key := "{tlstest}:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	script := redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1], 'EX', 60) return redis.call('GET', KEYS[1])`)
	got, err := script.Run(ctx, rdb, []string{key}, "over-tls").Text()
	if err != nil {
		return err
	}
	if got != "over-tls" {
		t.Errorf("script returned %q, want over-tls", got)
	}
	return nil
}

// startTLSRedis starts a redis-server listening on TLS only on a free
// loopback port, with tls-auth-clients authClients (yes, no, optional),
// optionally as a one-node cluster owning every slot; it is killed when
// the test ends. It returns the server's address.
func startTLSRedis(t *testing.T, certs testcert.Files, authClients string, cluster bool) string {
	t.Helper()
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	clientCert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := testutil.StartServer(t, testutil.ServerOptions{Name: "redis-server", Wait: 30 * time.Second,
		Args: func(srv *testutil.Server) []string {
			args := []string{"--port", "0", "--tls-port", strconv.Itoa(srv.Port), "--bind", "127.0.0.1",
				"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey,
				"--tls-ca-cert-file", certs.CA, "--tls-auth-clients", authClients,
				"--save", "", "--appendonly", "no", "--dir", srv.Dir, "--logfile", srv.Log, "--daemonize", "no"}
			if cluster {
				args = append(args, "--cluster-enabled", "yes", "--tls-cluster", "yes", "--cluster-announce-ip", "127.0.0.1",
					"--cluster-port", strconv.Itoa(testutil.FreePort(t)), "--cluster-config-file", filepath.Join(srv.Dir, "nodes.conf"))
			}
			return args
		},
		Ready: func(ctx context.Context, srv *testutil.Server) error {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, TLSConfig: &tls.Config{
				RootCAs: pool, ServerName: certs.ServerName(), Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12,
			}})
			defer rdb.Close()
			if err := rdb.Ping(ctx).Err(); err != nil {
				return err
			}
			if !cluster {
				return nil
			}
			if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil && !strings.Contains(err.Error(), "already busy") {
				return err
			}
			info, err := rdb.ClusterInfo(ctx).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state not ok yet")
			}
			return err
		},
	})
	return srv.Addr
}
