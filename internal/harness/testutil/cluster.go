package testutil

import (
	"context"
	"errors"
	"fmt"
	"github.com/redcrawl/redcrawl/shared/hashslot"
	"os/exec"
	"slices"
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
	c := &Cluster{killed: map[string]bool{}}
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
// and waits for the process to exit.
func (c *Cluster) Kill(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("kill %s: no such node", addr)
	}
	c.mu.Lock()
	c.killed[addr] = true
	c.mu.Unlock()
	nd.Server.Kill()
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

// Resume continues a node Pause stopped.
func (c *Cluster) Resume(addr string) error {
	nd := c.Node(addr)
	if nd == nil {
		return fmt.Errorf("resume %s: no such node", addr)
	}
	return nd.Server.Resume()
}

// ReplicasOf returns the live nodes that were created as replicas of the
// master at addr.
func (c *Cluster) ReplicasOf(addr string) []string {
	var out []string
	for _, nd := range c.Live() {
		if nd.Master == addr {
			out = append(out, nd.Addr)
		}
	}
	return out
}

// Masters returns the addresses of the live masters that serve slots, as
// a live node sees them, sorted.
func (c *Cluster) Masters(ctx context.Context) ([]string, error) {
	nd, err := c.anyLive()
	if err != nil {
		return nil, err
	}
	view, err := clusterNodes(ctx, nd.Client)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range view {
		if v.has("master") && !v.failing() && len(v.slots) > 0 {
			out = append(out, v.addr)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Role asks the node at addr for its role: "master" or "replica".
func (c *Cluster) Role(ctx context.Context, addr string) (string, error) {
	nd := c.Node(addr)
	if nd == nil {
		return "", fmt.Errorf("role of %s: no such node", addr)
	}
	info, err := nd.Client.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("role of %s: %w", addr, err)
	}
	if infoField(info, "role") == "slave" {
		return "replica", nil
	}
	return "master", nil
}

// SlotOwner returns the address of the master serving slot, as a live
// node sees it.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (string, error) {
	nd, err := c.anyLive()
	if err != nil {
		return "", err
	}
	slots, err := nd.Client.ClusterSlots(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("slot owner: %w", err)
	}
	for _, s := range slots {
		if int(s.Start) <= slot && slot <= int(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d has no owner", slot)
}

// KeySlot returns the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	nd, err := c.anyLive()
	if err != nil {
		return 0, err
	}
	s, err := nd.Client.ClusterKeySlot(ctx, key).Result()
	return int(s), err
}

// WaitHealthy waits until every live node says cluster_state:ok with all
// 16384 slots assigned, every live node sees the same masters and replicas
// and none of them failing, and every live replica's link to its master
// is up (master_link_status:up: its initial sync is done). It polls every
// 50ms until ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for {
		err := c.healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %w (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	live := c.Live()
	var ref string
	for _, nd := range live {
		info, err := nd.Client.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: cluster info: %w", nd.Addr, err)
		}
		if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_assigned") != "16384" {
			return fmt.Errorf("%s: cluster_state:%s, %s slots assigned", nd.Addr,
				infoField(info, "cluster_state"), infoField(info, "cluster_slots_assigned"))
		}
		view, err := clusterNodes(ctx, nd.Client)
		if err != nil {
			return err
		}
		var lines []string
		for _, v := range view {
			if c.isKilled(v.addr) {
				continue
			}
			if v.failing() || v.has("handshake") || v.has("noaddr") {
				return fmt.Errorf("%s sees %s as %s", nd.Addr, v.addr, strings.Join(v.flags, ","))
			}
			role := "master"
			if v.has("slave") {
				role = "replica of " + v.master
			}
			lines = append(lines, v.id+" "+v.addr+" "+role)
		}
		slices.Sort(lines)
		if got := strings.Join(lines, "\n"); ref == "" {
			ref = got
		} else if got != ref {
			return fmt.Errorf("nodes disagree on the topology: %s sees\n%s\nanother sees\n%s", nd.Addr, got, ref)
		}
		repl, err := nd.Client.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("%s: info replication: %w", nd.Addr, err)
		}
		if infoField(repl, "role") == "slave" {
			if st := infoField(repl, "master_link_status"); st != "up" {
				return fmt.Errorf("replica %s: master_link_status:%s", nd.Addr, st)
			}
		}
	}
	return nil
}

// WaitFailover waits until a replica of the killed master killedAddr is
// promoted: every live node sees the killed node as failed and the same
// former replica as a master serving slots, and says cluster_state:ok. It
// returns the promoted node's address. It polls every 20ms until ctx ends.
func (c *Cluster) WaitFailover(ctx context.Context, killedAddr string) (string, error) {
	killed := c.Node(killedAddr)
	if killed == nil {
		return "", fmt.Errorf("wait failover of %s: no such node", killedAddr)
	}
	for {
		promoted, err := c.failedOver(ctx, killed)
		if err == nil {
			return promoted, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait failover of %s: %w (%w)", killedAddr, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) failedOver(ctx context.Context, killed *ClusterNode) (string, error) {
	promoted := ""
	for _, nd := range c.Live() {
		info, err := nd.Client.ClusterInfo(ctx).Result()
		if err != nil {
			return "", fmt.Errorf("%s: cluster info: %w", nd.Addr, err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return "", fmt.Errorf("%s: cluster_state:%s", nd.Addr, st)
		}
		view, err := clusterNodes(ctx, nd.Client)
		if err != nil {
			return "", err
		}
		if k := view.byID(killed.ID); k == nil || !k.has("fail") {
			return "", fmt.Errorf("%s does not yet see %s as failed", nd.Addr, killed.Addr)
		}
		var p string
		for _, v := range view {
			if orig := c.Node(v.addr); orig != nil && orig.Master == killed.Addr && v.has("master") && len(v.slots) > 0 {
				p = v.addr
			}
		}
		if p == "" {
			return "", fmt.Errorf("%s sees no replica of %s promoted", nd.Addr, killed.Addr)
		}
		if promoted != "" && p != promoted {
			return "", fmt.Errorf("nodes disagree on the promoted replica: %s and %s", promoted, p)
		}
		promoted = p
	}
	if promoted == "" {
		return "", errors.New("no live node")
	}
	return promoted, nil
}

// NodeStat is one live node's share of the work.
type NodeStat struct {
	Addr string
	Role string // "master" or "replica", as the node says now
	Keys int64  // DBSIZE
	// Matched counts the keys matching the NodeStats pattern (SCAN MATCH);
	// 0 without a pattern.
	Matched int64
	// CPU is the node's CPU time so far (INFO cpu used_cpu_sys +
	// used_cpu_user).
	CPU time.Duration
}

// NodeStats samples every live node: its role, DBSIZE, the number of keys
// matching match (a SCAN MATCH pattern, see CrawlKeyPattern; "" skips the
// scan) and its CPU time.
func (c *Cluster) NodeStats(ctx context.Context, match string) ([]NodeStat, error) {
	var out []NodeStat
	for _, nd := range c.Live() {
		st := NodeStat{Addr: nd.Addr}
		var err error
		if st.Role, err = c.Role(ctx, nd.Addr); err != nil {
			return nil, err
		}
		if st.Keys, err = nd.Client.DBSize(ctx).Result(); err != nil {
			return nil, fmt.Errorf("%s: dbsize: %w", nd.Addr, err)
		}
		if match != "" {
			// a replica answers SCAN for its own data set (READONLY is only
			// needed for keyed commands)
			iter := nd.Client.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				st.Matched++
			}
			if err := iter.Err(); err != nil {
				return nil, fmt.Errorf("%s: scan %s: %w", nd.Addr, match, err)
			}
		}
		info, err := nd.Client.Info(ctx, "cpu").Result()
		if err != nil {
			return nil, fmt.Errorf("%s: info cpu: %w", nd.Addr, err)
		}
		for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
			f, err := strconv.ParseFloat(infoField(info, k), 64)
			if err != nil {
				return nil, fmt.Errorf("%s: info cpu %s: %w", nd.Addr, k, err)
			}
			st.CPU += time.Duration(f * float64(time.Second))
		}
		out = append(out, st)
	}
	return out, nil
}

// CrawlKeyPattern is the SCAN MATCH pattern of every key of a crawl, both
// unsharded (crawl:{name}:...) and sharded (crawl:{name:k}:...).
func CrawlKeyPattern(name string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return "crawl:{" + r.Replace(name) + "[}:]*"
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

// nodeLine is one line of CLUSTER NODES.
type nodeLine struct {
	id, addr, master string
	flags, slots     []string
}

func (v *nodeLine) has(flag string) bool { return slices.Contains(v.flags, flag) }

func (v *nodeLine) failing() bool { return v.has("fail") || v.has("fail?") }

type nodeView []nodeLine

func (w nodeView) byAddr(addr string) *nodeLine {
	for i := range w {
		if w[i].addr == addr {
			return &w[i]
		}
	}
	return nil
}

func (w nodeView) byID(id string) *nodeLine {
	for i := range w {
		if w[i].id == id {
			return &w[i]
		}
	}
	return nil
}

// clusterNodes parses CLUSTER NODES: id ip:port@cport[,hostname] flags
// master ping pong epoch link slot...
func clusterNodes(ctx context.Context, rdb *redis.Client) (nodeView, error) {
	s, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: cluster nodes: %w", rdb.Options().Addr, err)
	}
	var out nodeView
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%s: cluster nodes: malformed line %q", rdb.Options().Addr, line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, nodeLine{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return out, nil
}

// infoField returns the value of key in an INFO or CLUSTER INFO reply.
func infoField(info, key string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// HashSlot is Redis Cluster's slot of a key (hashslot.Of).
func HashSlot(key string) int { return hashslot.Of(key) }

// SlotOwners reads the slot map once: owner(slot) is the address of the
// master serving it ("" when none).
func (c *Cluster) SlotOwners(ctx context.Context) (owner func(slot int) string, err error) {
	nd, err := c.anyLive()
	if err != nil {
		return nil, err
	}
	slots, err := nd.Client.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("slot owners: %w", err)
	}
	return func(slot int) string {
		for _, s := range slots {
			if int(s.Start) <= slot && slot <= int(s.End) && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
		return ""
	}, nil
}

// MoveEmptySlot gives a slot that holds no key to the master at toAddr, as
// redis-cli --cluster reshard does for an empty slot (CLUSTER SETSLOT ...
// NODE on the new owner, then on every other master), and waits until
// every live node agrees and the cluster is healthy.
func (c *Cluster) MoveEmptySlot(ctx context.Context, slot int, toAddr string) error {
	to := c.Node(toAddr)
	if to == nil {
		return fmt.Errorf("move slot %d: no node %s", slot, toAddr)
	}
	owner, err := c.SlotOwners(ctx)
	if err != nil {
		return err
	}
	if owner(slot) == toAddr {
		return nil
	}
	if n, err := c.Node(owner(slot)).Client.ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || n != 0 {
		return fmt.Errorf("move slot %d: %d keys in it (%v): only an empty slot moves here", slot, n, err)
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		return err
	}
	nodes := []*ClusterNode{to}
	for _, a := range masters {
		if a != toAddr {
			nodes = append(nodes, c.Node(a))
		}
	}
	for _, nd := range nodes { // masters only: replicas follow theirs
		if err := nd.Client.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to.ID).Err(); err != nil {
			return fmt.Errorf("move slot %d on %s: %w", slot, nd.Addr, err)
		}
	}
	for {
		owner, err := c.SlotOwners(ctx)
		if err == nil && owner(slot) == toAddr && c.healthy(ctx) == nil {
			agree := true
			for _, nd := range c.Live() {
				slots, err := nd.Client.ClusterSlots(ctx).Result()
				if err != nil {
					agree = false
					break
				}
				for _, s := range slots {
					if int(s.Start) <= slot && slot <= int(s.End) && (len(s.Nodes) == 0 || s.Nodes[0].Addr != toAddr) {
						agree = false
					}
				}
			}
			if agree {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("move slot %d to %s: %w", slot, toAddr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
