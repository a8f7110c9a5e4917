package testutil

// Reading a test cluster's state: roles, replicas, slot owners, node stats,
// from CLUSTER NODES and INFO.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/hashslot"

	"github.com/redis/go-redis/v9"
)

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

// replicasNow returns the live replicas of the node at addr as a live
// node sees them now.
func (c *Cluster) replicasNow(ctx context.Context, addr string) ([]string, error) {
	nd, err := c.anyLive()
	if err != nil {
		return nil, err
	}
	view, err := clusterNodes(ctx, nd.Client)
	if err != nil {
		return nil, err
	}
	m := view.byAddr(addr)
	if m == nil {
		return nil, fmt.Errorf("replicas of %s: not in CLUSTER NODES", addr)
	}
	var out []string
	for _, v := range view {
		if v.has("slave") && v.master == m.id && !v.failing() && !c.isKilled(v.addr) {
			out = append(out, v.addr)
		}
	}
	slices.Sort(out)
	return out, nil
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
	if InfoField(info, "role") == "slave" {
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
			f, err := strconv.ParseFloat(InfoField(info, k), 64)
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

// InfoField returns the value of key in an INFO or CLUSTER INFO reply.
func InfoField(info, key string) string {
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
