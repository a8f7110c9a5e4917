package testutil

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// TestStartCluster starts a 3-master, 1-replica-each cluster, writes keys
// of a sharded and an unsharded crawl, checks NodeStats counts them where
// the slot map says, kills a master with SIGKILL and checks its replica
// takes over its slots with the data replicated before the kill.
func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	var created []string
	for _, nd := range c.Nodes {
		if nd.Role == "master" {
			created = append(created, nd.Addr)
		}
	}
	slices.Sort(created)
	masters, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(created, masters); d != "" {
		t.Fatalf("Masters() differs from the roles at creation (-created +Masters):\n%s", d)
	}

	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.Nodes[0].Addr}})
	defer rdb.Close()
	name := CrawlName("tu-cluster")
	other := name + "x" // a crawl whose name extends ours: not counted
	want := map[string]int64{}
	keys := []string{"crawl:{" + name + "}:meta", "crawl:{" + other + "}:meta", "crawl:{" + other + ":0}:q"}
	for k := range 12 {
		keys = append(keys, fmt.Sprintf("crawl:{%s:%d}:q", name, k))
	}
	for _, key := range keys {
		if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, err := c.KeySlot(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		if key != keys[1] && key != keys[2] {
			want[owner]++
		}
	}
	// the replicas have the writes once WAIT says so; a replica still in
	// its first sync may have none yet: poll until each holds its master's
	// keys (bounded), then check
	for _, m := range masters {
		if err := c.Node(m).Client.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		stats, err := c.NodeStats(ctx, CrawlKeyPattern(name))
		if err != nil {
			t.Fatal(err)
		}
		synced := true
		for _, st := range stats {
			if st.Role != "master" && st.Matched != want[c.Node(st.Addr).Master] {
				synced = false
			}
		}
		if synced {
			break
		}
	}
	stats, err := c.NodeStats(ctx, CrawlKeyPattern(name))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, st := range stats {
		if st.Role == "master" {
			got[st.Addr] = st.Matched
		} else {
			// a replica holds its master's keys
			nd := c.Node(st.Addr)
			if st.Matched != want[nd.Master] {
				t.Errorf("replica %s of %s: %d keys of the crawl, want %d", st.Addr, nd.Master, st.Matched, want[nd.Master])
			}
		}
		total += st.Matched
		if st.CPU <= 0 || st.Keys < st.Matched {
			t.Errorf("node %s: %+v", st.Addr, st)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("crawl keys per master (-want +got):\n%s", d)
	}

	// kill the master of the first key; its replica takes over
	slot, err := c.KeySlot(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	victim, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	promoted, err := c.WaitFailover(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if nd := c.Node(promoted); nd.Master != victim {
		t.Fatalf("promoted %s was the replica of %s, not of the killed %s", promoted, nd.Master, victim)
	}
	if owner, err := c.SlotOwner(ctx, slot); err != nil || owner != promoted {
		t.Fatalf("slot %d owner after the failover: %q %v, want %s", slot, owner, err, promoted)
	}
	if role, err := c.Role(ctx, promoted); err != nil || role != "master" {
		t.Fatalf("promoted %s says role %q %v", promoted, role, err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Node(promoted).Client.Get(ctx, keys[0]).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s on the promoted replica: %q %v", keys[0], v, err)
	}
	after, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantMasters := slices.Sorted(slices.Values(append(slices.DeleteFunc(slices.Clone(masters),
		func(a string) bool { return a == victim }), promoted)))
	if d := cmp.Diff(wantMasters, after); d != "" {
		t.Errorf("masters after the failover (-want +got):\n%s", d)
	}

	// the killed master, restarted, rejoins as the replica of its own
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if role, err := c.Role(ctx, victim); err != nil || role != "replica" {
		t.Errorf("restarted %s says role %q %v, want replica", victim, role, err)
	}
	if d := cmp.Diff(wantMasters, mustMasters(t, ctx, c)); d != "" {
		t.Errorf("masters after the restart (-want +got):\n%s", d)
	}

	// roles turned around: the promoted replica, killed, fails over to
	// the first victim, its replica now
	if err := c.Kill(promoted); err != nil {
		t.Fatal(err)
	}
	if again, err := c.WaitFailover(ctx, promoted); err != nil || again != victim {
		t.Fatalf("failover of %s: %q promoted, %v; want %s", promoted, again, err, victim)
	}
}

func mustMasters(t *testing.T, ctx context.Context, c *Cluster) []string {
	t.Helper()
	m, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCrawlKeyPattern(t *testing.T) {
	tests := []struct {
		name, key string
		want      bool
	}{
		{"c1", "crawl:{c1}:meta", true},
		{"c1", "crawl:{c1:3}:q", true},
		{"c1", "crawl:{c1x}:meta", false},
		{"c1", "crawl:{c1-2:0}:q", false},
		{"c*", "crawl:{c1}:meta", false},
		{"c*", "crawl:{c*}:meta", true},
	}
	rdb := redis.NewClient(&redis.Options{Addr: StartRedis(t, nil).Addr})
	defer rdb.Close()
	ctx := context.Background()
	for _, tt := range tests {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, tt.key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		keys, _, err := rdb.Scan(ctx, 0, CrawlKeyPattern(tt.name), 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(keys) == 1; got != tt.want {
			t.Errorf("CrawlKeyPattern(%q) matches %q: %v, want %v", tt.name, tt.key, got, tt.want)
		}
	}
}

// TestClusterAckedWriteLoss shows the write loss asynchronous replication
// allows, as KillBehind makes it: the master acknowledges writes its
// replica never gets; the master is killed, the replica promoted, and the
// acknowledged writes are gone.
func TestClusterAckedWriteLoss(t *testing.T) {
	c := StartCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slot, err := c.KeySlot(ctx, "{loss}")
	if err != nil {
		t.Fatal(err)
	}
	victim, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if replicas := c.ReplicasOf(victim); len(replicas) != 1 {
		t.Fatalf("replicas of %s: %v", victim, replicas)
	}
	m := c.Node(victim).Client
	if err := m.Set(ctx, "{loss}:n", 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	var acked int64
	if err := c.KillBehind(ctx, victim, func() {
		for range 50 {
			if acked, err = m.Incr(ctx, "{loss}:n").Result(); err != nil {
				t.Error(err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	promoted, err := c.WaitFailover(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.Node(promoted).Client.Get(ctx, "{loss}:n").Int64()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged {loss}:n = %d; the promoted replica has %d: %d acknowledged INCRs lost", acked, kept, acked-kept)
	if kept >= acked {
		t.Errorf("the promoted replica has {loss}:n = %d, the last acknowledged value %d: no write lost", kept, acked)
	}
}
