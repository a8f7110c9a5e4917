package frontier

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes that must survive a failover. Redis replicates asynchronously: a
// write its master acknowledged is lost when the master dies before its
// replica got it, and the replica promoted in its place. Most of what the
// functions write repairs itself then (a lost claim leaves its task
// queued, a lost ack leaves its lease to expire and its page to be fetched
// again), but not everything:
//   - links sent to another shard (links, sharded.go) are enqueued there
//     before the page is completed on its own shard: if the links are lost
//     and the ack is not, nothing fetches the page again and a URL linked
//     from it alone is never known;
//   - a process's link cache (linkcache.go) remembers the links a call put
//     through the seen set, and no longer sends them: once those writes
//     are lost, a page fetched again sends its links to nobody.
// So the calls whose writes these rest on (complete, complete_claim, links,
// seed, reseed) wait for a replica (WAIT, on the connection that made the
// call) before they return, when the node has one: what a caller was told
// is done, and what its link cache remembers, is on two nodes. A WAIT that
// times out (a replica lagging or gone) is counted (ReplicaLag) and the
// call goes on: a crawl on a degraded cluster keeps going.

// replicaWait is a crawl's waiting for replicas: Options.WaitReplicas and
// WaitTimeout, each node's replica count (asked every replicasTTL), and
// the WAITs that ended short.
type replicaWait struct {
	want    int
	timeout time.Duration
	mu      sync.Mutex
	nodes   map[string]nodeReplicas
	short   atomic.Int64
	waits   atomic.Int64
}

type nodeReplicas struct {
	n  int
	at time.Time
}

// replicasTTL is how long a node's replica count is trusted.
const replicasTTL = 5 * time.Second

func newReplicaWait(opt Options) *replicaWait {
	if opt.WaitReplicas <= 0 {
		return nil
	}
	t := opt.WaitTimeout
	if t <= 0 {
		t = time.Second
	}
	return &replicaWait{want: opt.WaitReplicas, timeout: t, nodes: map[string]nodeReplicas{}}
}

// ReplicaLag returns how many calls waited for a replica, and how many of
// those WAITs ended with fewer replicas than Options.WaitReplicas.
func (f *Redis) ReplicaLag() (waits, short int64) {
	if f.shards[0].wait == nil {
		return 0, 0
	}
	return f.shards[0].wait.waits.Load(), f.shards[0].wait.short.Load()
}

// node returns the client of the node that serves this shard's keys (the
// shard's own client unless a cluster's) and how many replicas it has.
func (f *shard) node(ctx context.Context) (*redis.Client, int, error) {
	var c *redis.Client
	switch r := f.rdb.(type) {
	case *redis.Client:
		c = r
	case *redis.ClusterClient:
		var err error
		if c, err = r.MasterForKey(ctx, f.keys.Meta); err != nil {
			return nil, 0, err
		}
	default:
		return nil, 0, nil
	}
	w := f.wait
	addr := c.Options().Addr
	w.mu.Lock()
	e, ok := w.nodes[addr]
	w.mu.Unlock()
	if ok && time.Since(e.at) < replicasTTL {
		return c, e.n, nil
	}
	// ROLE: a master answers ["master", offset, [replica, ...]]
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return nil, 0, err
	}
	n := 0
	if len(role) == 3 && role[0] == "master" {
		if rs, ok := role[2].([]any); ok {
			n = len(rs)
		}
	}
	// a node keeps the most replicas it was seen with: one cut off for a
	// moment is when its writes are most at risk, not a reason to stop
	// waiting for it (a WAIT then times out, and is counted)
	w.mu.Lock()
	n = max(n, e.n)
	w.nodes[addr] = nodeReplicas{n: n, at: time.Now()}
	w.mu.Unlock()
	return c, n, nil
}

// replicated reports whether this shard's node was seen with replicas
// (and writes to it are waited for), from what node last counted.
func (f *shard) replicated() bool {
	w := f.wait
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.nodes {
		if e.n > 0 {
			return true
		}
	}
	return false
}

// callDurable is call for a function whose writes must survive a
// failover: it waits for Options.WaitReplicas replicas (at most as many
// as the node has) to acknowledge them before it returns.
func (f *shard) callDurable(ctx context.Context, name string, args ...any) (any, error) {
	w := f.wait
	if w == nil {
		return f.call(ctx, name, args...)
	}
	node, replicas, err := f.node(ctx)
	if err != nil || node == nil || replicas == 0 {
		// no replica to wait for, or the node unknown now: the plain call
		// says what is wrong
		return f.call(ctx, name, args...)
	}
	// WAIT waits for the last write of its own connection: a call that
	// wrote nothing (its links all seen) would return at once, though
	// what it found (the writes of another call, on another connection)
	// may not be on the replica yet. A write of this connection after the
	// call makes the WAIT cover everything the call saw.
	pipe := node.Pipeline()
	res := f.fcallCmd(ctx, f.fcallArgs(f.library().fn(name), args))
	_ = pipe.Process(ctx, res)
	pipe.HIncrBy(ctx, f.keys.Meta, "wseq", 1)
	want := min(w.want, replicas)
	acked := pipe.Do(ctx, "WAIT", want, w.timeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	if err := res.Err(); err != nil {
		if isNoFunction(err) {
			return f.call(ctx, name, args...) // loads the library (a master) or says which is missing
		}
		if cc, ok := f.rdb.(*redis.ClusterClient); ok && (isMoved(err) || isUnavailable(err)) {
			// the slot moved (a failover): the cluster client learns where
			cc.ReloadState(ctx)
			return nil, errors.Join(ErrUnavailable, err)
		}
		return nil, err
	}
	w.waits.Add(1)
	n, err := acked.Int64()
	if err != nil {
		// the call ran, but the node went before its replica said it had
		// the writes: they may be lost, so the caller must not count on
		// them (a completion is sent again, and finds its lease if the
		// writes were lost)
		return nil, errors.Join(ErrUnavailable, err)
	}
	if n < int64(want) {
		w.short.Add(1)
	}
	return res.Val(), nil
}

// callSliceDurable is callDurable for a function that returns an array.
func (f *shard) callSliceDurable(ctx context.Context, name string, args ...any) ([]any, error) {
	res, err := f.callDurable(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, errors.New(name + " returned no array")
	}
	return arr, nil
}

// isMoved reports a cluster redirection: the slot is served elsewhere.
func isMoved(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "TRYAGAIN") ||
		strings.HasPrefix(s, "CLUSTERDOWN")
}
