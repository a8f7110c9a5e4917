package frontier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

var updateLibrarySum = flag.Bool("update-library-sum", false, "write testdata/library.sum from the library's code")

// TestLibraryVersion fails when the library's code changes without a new
// LibraryVersion: processes of two builds must never call functions of
// one name with different code (library.go). testdata/library.sum holds
// the version and the SHA-256 of the code it was released with.
func TestLibraryVersion(t *testing.T) {
	sum := sha256.Sum256([]byte(lib.src))
	got := fmt.Sprintf("%d %s\n", LibraryVersion, hex.EncodeToString(sum[:]))
	if *updateLibrarySum {
		if err := os.WriteFile("testdata/library.sum", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/library.sum")
	if err != nil {
		t.Fatal(err)
	}
	if string(want) == got {
		return
	}
	v, _, _ := strings.Cut(string(want), " ")
	if v == strconv.Itoa(LibraryVersion) {
		t.Fatalf("the library's code changed but LibraryVersion is still %d: set it to %d (library.go), then "+
			"go test ./shared/frontier/ -run TestLibraryVersion -update-library-sum", LibraryVersion, LibraryVersion+1)
	}
	t.Fatalf("LibraryVersion is %d, testdata/library.sum says %s: "+
		"go test ./shared/frontier/ -run TestLibraryVersion -update-library-sum", LibraryVersion, v)
}

// TestLibraryFunctions checks that every function the Go side calls is
// registered, and that the library names them with its version.
func TestLibraryFunctions(t *testing.T) {
	fns := lib.functions()
	want := []string{"claim", "complete", "complete_claim", "drain", "drop_stream", "extend", "finish",
		"finish_sharded", "heartbeat", "idle", "init", "leave", "limit_take", "limits_set", "links", "masters", "member_bit", "memory",
		"own", "recover_expired", "registry", "requeue_failed", "reseed", "retire", "seed", "seen_has", "shard_count", "snapshot"}
	if strings.Join(fns, ",") != strings.Join(want, ",") {
		t.Errorf("functions %v, want %v", fns, want)
	}
	if lib.fn("claim") != "rc"+strconv.Itoa(LibraryVersion)+"_claim" || !strings.HasPrefix(lib.src, "#!lua name=redcrawl_"+strconv.Itoa(LibraryVersion)+"\n") {
		t.Errorf("library %s names its functions %s", lib.name, lib.fn("claim"))
	}
}

// TestLibraryMissing: a slave that finds no library of its version says
// which version it needs and which one the crawl's master loaded, and a
// master loads it.
func TestLibraryMissing(t *testing.T) {
	srv := testutil.StartRedis(t, nil)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	opt := Options{Crawl: "libmissing", Slave: "s1"}

	_, err := NewRedis(ctx, rdb, opt)
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "start a master of this version") {
		t.Fatalf("slave on a Redis without the library: %v", err)
	}

	// a crawl whose master loaded another version
	if err := rdb.HSet(ctx, NewKeys("libmissing").Meta, metaLibrary, "redcrawl_0").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = NewRedis(ctx, rdb, opt)
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "redcrawl_0") || !strings.Contains(err.Error(), lib.name) {
		t.Fatalf("slave of another version than the master's: %v", err)
	}

	// a master loads it (on a new crawl: this version refuses one another
	// version made); the slave then opens the crawl
	if err := rdb.Del(ctx, NewKeys("libmissing").Meta).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRedis(ctx, rdb, Options{Crawl: "libmissing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRedis(ctx, rdb, opt); err != nil {
		t.Fatalf("slave after the master loaded the library: %v", err)
	}
	// loading again, with the same code, changes nothing; other code
	// under the same name (a development build) is replaced
	if err := LoadLibrary(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	dev := &library{name: lib.name, ns: lib.ns, src: lib.src + "\n-- a development build\n"}
	if err := loadLibrary(ctx, rdb, dev); err != nil {
		t.Fatal(err)
	}
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.name, WithCode: true}).Result()
	if err != nil || len(libs) != 1 || libs[0].Code != dev.src {
		t.Fatalf("after loading other code: %d libraries, %v", len(libs), err)
	}
}

// TestLibraryCluster: on a Redis Cluster the library is on every primary
// (and by replication on their replicas), a replica promoted by a
// failover has it, and a primary without it (a node that joined) makes a
// slave's call there fail as unavailable, naming the library, until a
// master loads it again (the master's librarian).
func TestLibraryCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rc := testutil.StartCluster(t, 3, 1)
	opt, err := redis.ParseClusterURL(rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(opt)
	t.Cleanup(func() { cc.Close() })
	if err := LoadLibrary(ctx, cc); err != nil {
		t.Fatal(err)
	}
	has := func(addr string) bool {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.name}).Result()
		return err == nil && len(libs) == 1
	}
	wantOnAll := func(what string) {
		t.Helper()
		for _, n := range rc.Live() {
			ok := false
			for range 100 { // a replica gets it by replication: bounded wait
				if ok = has(n.Addr); ok {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !ok {
				t.Errorf("%s: node %s has no %s", what, n.Addr, lib.name)
			}
		}
	}
	wantOnAll("loaded")

	masters, err := rc.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Kill(masters[0]); err != nil {
		t.Fatal(err)
	}
	promoted, err := rc.WaitFailover(ctx, masters[0])
	if err != nil {
		t.Fatal(err)
	}
	if !has(promoted) {
		t.Errorf("the replica promoted by the failover (%s) has no %s", promoted, lib.name)
	}
	if err := rc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	// a crawl on a primary that lost the library
	master, err := NewRedis(ctx, cc, Options{Crawl: "libcluster"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.Seed(ctx, []Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	slot, err := rc.KeySlot(ctx, master.Keys().Meta)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := rc.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	node := redis.NewClient(&redis.Options{Addr: owner})
	t.Cleanup(func() { node.Close() })
	if err := node.FunctionDelete(ctx, lib.name).Err(); err != nil {
		t.Fatal(err)
	}
	slave, err := NewRedis(ctx, cc, Options{Crawl: "libcluster", Slave: "s1"})
	if err == nil {
		_, err = claimN(ctx, slave, "s1", 1)
	} else {
		slave = nil
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("slave on a primary without the library: %v, want unavailable", err)
	}
	if err := LoadLibrary(ctx, cc); err != nil {
		t.Fatal(err)
	}
	if slave == nil {
		if slave, err = NewRedis(ctx, cc, Options{Crawl: "libcluster", Slave: "s1"}); err != nil {
			t.Fatal(err)
		}
	}
	if ls, err := claimN(ctx, slave, "s1", 1); err != nil || len(ls) != 1 {
		t.Fatalf("slave after the library was loaded again: %d leases, %v", len(ls), err)
	}
}

// TestUpgradeFromScripts: a crawl created by a version that ran EVAL
// scripts (no functions library on the Redis, no settings key, no lib in
// meta; its queues, leases and dedup as they were) goes on once a master
// of this version opens it: the slaves wait for the library with a clear
// error until then, and the work queued and leased before is all done.
func TestUpgradeFromScripts(t *testing.T) {
	srv := testutil.StartRedis(t, nil)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	opt := Options{Crawl: "upgrade", HostConcurrency: 2}
	master, err := NewRedis(ctx, rdb, opt)
	if err != nil {
		t.Fatal(err)
	}
	var seeds []Task
	for i := range 6 {
		seeds = append(seeds, Task{URL: fmt.Sprintf("http://h%d.test/", i%3) + strconv.Itoa(i), Host: fmt.Sprintf("h%d.test", i%3),
			ScopeHost: fmt.Sprintf("h%d.test", i%3)})
	}
	if _, err := master.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	held, err := claimN(ctx, master, "s1", 2)
	if err != nil || len(held) != 2 {
		t.Fatalf("claim: %d, %v", len(held), err)
	}
	// what the older version left: no library, no settings, no lib field
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	k := master.Keys()
	if err := rdb.Del(ctx, k.Settings).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, k.Meta, metaLibrary).Err(); err != nil {
		t.Fatal(err)
	}

	slaveOpt := opt
	slaveOpt.Slave = "s1"
	if _, err := NewRedis(ctx, rdb, slaveOpt); !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("slave before the master: %v, want the library missing", err)
	}
	if _, err := NewRedis(ctx, rdb, opt); err != nil {
		t.Fatalf("master of this version on the older crawl: %v", err)
	}
	slave, err := NewRedis(ctx, rdb, slaveOpt)
	if err != nil {
		t.Fatal(err)
	}
	// the leases held before the upgrade are acked; the rest is claimed
	var done []string
	cs := []Completion{}
	for _, l := range held {
		cs = append(cs, Completion{Lease: l, Outcome: Done})
		done = append(done, l.URL)
	}
	if acked, err := slave.Complete(ctx, "s1", cs); err != nil || !acked[0] || !acked[1] {
		t.Fatalf("ack of leases from before the upgrade: %v, %v", acked, err)
	}
	for range 20 {
		ls, err := claimN(ctx, slave, "s1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			done = append(done, l.URL)
			if _, err := slave.Complete(ctx, "s1", []Completion{{Lease: l, Outcome: Done}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(done) != len(seeds) {
		t.Errorf("done %d of %d: %v", len(done), len(seeds), done)
	}
}

// TestShardPlacement: a crawl created on a fresh 3-master cluster spreads
// its shards within one a master (6 shards: 2 each), every process opening
// it finds the same tags, and on a single Redis the tags are the defaults.
func TestShardPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rc := testutil.StartCluster(t, 3, 0)
	opt, err := redis.ParseClusterURL(rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(opt)
	t.Cleanup(func() { cc.Close() })
	for _, tc := range []struct {
		shards int
		want   []int // shards per master, sorted
	}{{6, []int{2, 2, 2}}, {4, []int{1, 1, 2}}, {9, []int{3, 3, 3}}, {2, []int{0, 1, 1}}} {
		crawl := fmt.Sprintf("place%d", tc.shards)
		f, err := NewRedis(ctx, cc, Options{Crawl: crawl, Shards: tc.shards})
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		masters, err := rc.Masters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range masters {
			per[m] = 0
		}
		for k := range tc.shards {
			slot, err := rc.KeySlot(ctx, f.ShardKeysOf(k).Meta)
			if err != nil {
				t.Fatal(err)
			}
			owner, err := rc.SlotOwner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			per[owner]++
		}
		var got []int
		for _, n := range per {
			got = append(got, n)
		}
		sort.Ints(got)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d shards on 3 masters: %v a master, want %v", tc.shards, got, tc.want)
		}
		again, err := NewRedis(ctx, cc, Options{Crawl: crawl, Shards: tc.shards, Slave: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		for k := range tc.shards {
			if again.ShardKeysOf(k) != f.ShardKeysOf(k) {
				t.Errorf("%d shards: shard %d is %s for one process, %s for another", tc.shards, k, f.ShardKeysOf(k).Prefix, again.ShardKeysOf(k).Prefix)
			}
		}
	}
	// a single Redis: the default tags
	rdb := redis.NewClient(&redis.Options{Addr: testutil.StartRedis(t, nil).Addr})
	t.Cleanup(func() { rdb.Close() })
	f, err := NewRedis(ctx, rdb, Options{Crawl: "placeone", Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		if f.ShardKeysOf(k) != ShardKeys("placeone", k) {
			t.Errorf("shard %d on one Redis: %s", k, f.ShardKeysOf(k).Prefix)
		}
	}
}
