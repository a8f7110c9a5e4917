package testutil

// Changing and waiting on a test cluster: until it is healthy, until a
// failover completes, moving an empty slot.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

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
		if InfoField(info, "cluster_state") != "ok" || InfoField(info, "cluster_slots_assigned") != "16384" {
			return fmt.Errorf("%s: cluster_state:%s, %s slots assigned", nd.Addr,
				InfoField(info, "cluster_state"), InfoField(info, "cluster_slots_assigned"))
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
		if InfoField(repl, "role") == "slave" {
			if st := InfoField(repl, "master_link_status"); st != "up" {
				return fmt.Errorf("replica %s: master_link_status:%s", nd.Addr, st)
			}
		}
	}
	return nil
}

// WaitFailover waits until a replica of the killed master killedAddr (one
// it had when Kill killed it) is promoted: every live node sees the killed node as failed and the same
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
	c.mu.Lock()
	replicas := c.replicas[killed.Addr]
	c.mu.Unlock()
	promoted := ""
	for _, nd := range c.Live() {
		info, err := nd.Client.ClusterInfo(ctx).Result()
		if err != nil {
			return "", fmt.Errorf("%s: cluster info: %w", nd.Addr, err)
		}
		if st := InfoField(info, "cluster_state"); st != "ok" {
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
			if slices.Contains(replicas, v.addr) && v.has("master") && len(v.slots) > 0 {
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
