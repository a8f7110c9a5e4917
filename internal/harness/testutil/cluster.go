package testutil

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions say how StartCluster starts its nodes.
type ClusterOptions struct {
	// NodeTimeout is every node's cluster-node-timeout (default 1s): a
	// master unreachable this long is suspected, then failed over.
	NodeTimeout time.Duration
	// AOF turns on appendonly (appendfsync everysec) on every node.
	AOF bool
	// Args are extra redis-server arguments for every node.
	Args []string
}

// ClusterOption changes ClusterOptions.
type ClusterOption func(*ClusterOptions)

// WithNodeTimeout sets cluster-node-timeout.
func WithNodeTimeout(d time.Duration) ClusterOption {
	return func(o *ClusterOptions) { o.NodeTimeout = d }
}

// WithAOF turns on appendonly yes, appendfsync everysec on every node.
func WithAOF() ClusterOption { return func(o *ClusterOptions) { o.AOF = true } }

// WithNodeArgs adds redis-server arguments to every node.
func WithNodeArgs(args ...string) ClusterOption {
	return func(o *ClusterOptions) { o.Args = append(o.Args, args...) }
}

// ClusterNode is one redis-server process of a Cluster.
type ClusterNode struct {
	Addr   string
	ID     string // its cluster node id
	Server *Server
	// Client talks to this node only (no retries). Do not use it once the
	// node is killed.
	Client *redis.Client
	// Role is the role it was created with, "master" or "replica";
	// Cluster.Role asks the live one.
	Role string
	// Master is, for a replica, its master's address at creation.
	Master string
}

// Cluster is a Redis Cluster of redis-server processes on 127.0.0.1 that
// a test started (see StartCluster). Its methods are safe for concurrent
// use.
type Cluster struct {
	Nodes []*ClusterNode
	// URL names every node as a seed, for redis.url with redis.cluster:
	// redis://127.0.0.1:p1?addr=127.0.0.1:p2&addr=...
	URL string

	mu     sync.Mutex
	killed map[string]bool
	// replicas holds, for a node Kill killed, its replicas at the kill:
	// the nodes one of which takes over (WaitFailover)
	replicas map[string][]string
}

// StartCluster starts masters + masters·replicasPerMaster redis-server
// processes in cluster mode on free loopback ports (no RDB saves, AOF only
// WithAOF), joins them with redis-cli --cluster create --cluster-replicas
// and waits until every node says cluster_state:ok, all nodes agree on the
// topology and every replica's link to its master is up. The test is
// skipped when redis-server or redis-cli is not installed; the processes
// are killed when it ends.
func StartCluster(t testing.TB, masters, replicasPerMaster int, opts ...ClusterOption) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("StartCluster: redis-cli --cluster create needs at least 3 masters, not %d", masters)
	}
	if replicasPerMaster < 0 {
		t.Fatalf("StartCluster: %d replicas per master", replicasPerMaster)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found in PATH: the Redis Cluster test needs it (apt-get install redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found in PATH: the Redis Cluster test needs it (apt-get install redis-tools)")
	}
	o := ClusterOptions{NodeTimeout: time.Second}
	for _, f := range opts {
		f(&o)
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = time.Second
	}
	c := &Cluster{killed: map[string]bool{}, replicas: map[string][]string{}}
	n := masters * (1 + replicasPerMaster)
	for range n {
		srv := StartServer(t, ServerOptions{Name: "redis-server",
			Args: func(s *Server) []string {
				aof := []string{"--appendonly", "no"}
				if o.AOF {
					aof = []string{"--appendonly", "yes", "--appendfsync", "everysec"}
				}
				args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
					// the bus port defaults to port+10000, which may be taken or > 65535
					"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(FreePort(t)),
					"--cluster-config-file", "nodes.conf",
					"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
					"--save", "", "--dir", s.Dir, "--logfile", s.Log, "--daemonize", "no"}
				return append(append(args, aof...), o.Args...)
			},
			Ready: func(ctx context.Context, s *Server) error {
				rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
				defer rdb.Close()
				return rdb.Ping(ctx).Err()
			},
		})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
		t.Cleanup(func() { rdb.Close() })
		c.Nodes = append(c.Nodes, &ClusterNode{Addr: srv.Addr, Server: srv, Client: rdb})
	}
	addrs := make([]string, n)
	for i, nd := range c.Nodes {
		addrs[i] = nd.Addr
	}
	c.URL = "redis://" + addrs[0]
	if n > 1 {
		c.URL += "?addr=" + strings.Join(addrs[1:], "&addr=")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	// record the topology as created
	view, err := clusterNodes(ctx, c.Nodes[0].Client)
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	byID := map[string]string{}
	for _, v := range view {
		byID[v.id] = v.addr
	}
	replicas := map[string]int{}
	for _, nd := range c.Nodes {
		v := view.byAddr(nd.Addr)
		if v == nil {
			t.Fatalf("StartCluster: node %s is missing from CLUSTER NODES", nd.Addr)
		}
		nd.ID = v.id
		nd.Role = "master"
		if v.has("slave") {
			nd.Role, nd.Master = "replica", byID[v.master]
			replicas[nd.Master]++
		}
	}
	for _, nd := range c.Nodes {
		if nd.Role == "master" && replicas[nd.Addr] != replicasPerMaster {
			t.Fatalf("StartCluster: master %s has %d replicas, want %d", nd.Addr, replicas[nd.Addr], replicasPerMaster)
		}
	}
	return c
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *ClusterNode {
	for _, nd := range c.Nodes {
		if nd.Addr == addr {
			return nd
		}
	}
	return nil
}

// Live returns the nodes not killed.
func (c *Cluster) Live() []*ClusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*ClusterNode
	for _, nd := range c.Nodes {
		if !c.killed[nd.Addr] {
			out = append(out, nd)
		}
	}
	return out
}

// Kill kills the node at addr with SIGKILL (no shutdown, nothing saved)
// and waits for the process to exit. It notes the node's replicas first,
// as the cluster has them now (a failover may have turned the roles it
// was created with around), for WaitFailover.
func (c *Cluster) Kill(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("kill %s: no such node", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	replicas, err := c.replicasNow(ctx, addr)
	cancel()
	if err != nil {
		return fmt.Errorf("kill %s: %w", addr, err)
	}
	c.kill(nd, replicas)
	return nil
}

// kill kills nd, noting its replicas.
func (c *Cluster) kill(nd *ClusterNode, replicas []string) {
	c.mu.Lock()
	c.killed[nd.Addr] = true
	c.replicas[nd.Addr] = replicas
	c.mu.Unlock()
	nd.Server.Kill()
}

// Restart starts a node Kill killed again, on its port and directory: it
// reads its nodes.conf back and rejoins the cluster, as a replica of the
// master that took over its slots if one did (restart a killed master only
// after WaitFailover: with no AOF it comes back empty, and as the master
// of its slots it would hand its replica that emptiness). It waits until
// the process answers, not until the cluster is healthy (WaitHealthy).
func (c *Cluster) Restart(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("restart %s: no such node", addr)
	}
	if err := nd.Server.Restart(); err != nil {
		return fmt.Errorf("restart %s: %w", addr, err)
	}
	c.mu.Lock()
	delete(c.killed, addr)
	c.mu.Unlock()
	return nil
}

// Pause stops the node at addr with SIGSTOP (see Server.Pause): a paused
// replica falls behind its master, whose writes then wait in the master's
// buffers, lost if the master dies before Resume.
func (c *Cluster) Pause(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("pause %s: no such node", addr)
	}
	return nd.Server.Pause()
}

// KillBehind kills the master at addr as a failover loses writes: its
// replicas are stopped (Pause) and their replication links cut, then
// during runs (what the master acknowledges meanwhile is on it alone),
// then the master is killed (Kill) and the replicas resumed. A replica
// promoted then lacks those writes, as Redis's asynchronous replication
// allows; by luck alone a kill rarely lands in that window on loopback,
// where a replica is a fraction of a millisecond behind.
func (c *Cluster) KillBehind(ctx context.Context, addr string, during func()) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("kill %s: no such node", addr)
	}
	replicas, err := c.replicasNow(ctx, addr)
	if err != nil {
		return fmt.Errorf("kill %s: %w", addr, err)
	}
	for _, r := range replicas {
		if err := c.Pause(r); err != nil {
			return err
		}
	}
	err = nd.Client.ClientKillByFilter(ctx, "TYPE", "replica").Err()
	if err == nil {
		during()
		c.kill(nd, replicas)
	}
	for _, r := range replicas {
		if rerr := c.Resume(r); err == nil {
			err = rerr
		}
	}
	return err
}

// Resume continues a node Pause stopped.
func (c *Cluster) Resume(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("resume %s: no such node", addr)
	}
	return nd.Server.Resume()
}

func (c *Cluster) isKilled(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[addr]
}

func (c *Cluster) anyLive() (*ClusterNode, error) {
	live := c.Live()
	if len(live) == 0 {
		return nil, errors.New("every node of the cluster is killed")
	}
	return live[0], nil
}
