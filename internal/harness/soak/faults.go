package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/tcpproxy"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// The kinds of fault.
const (
	faultSlaveKill   = "slave_kill"        // a direct slave SIGKILLed, restarted after up to 3s
	faultSlaveFreeze = "slave_freeze"      // a direct slave SIGSTOPped for up to 8s (twice its lease)
	faultMasterKill  = "master_kill"       // the master SIGKILLed, restarted after up to 3s
	faultMySQLCut    = "mysql_cut"         // the master's connection to MySQL cut for up to 8s
	faultMySQLRO     = "mysql_read_only"   // MySQL refusing the master's writes for up to 8s
	faultRedisKill   = "redis_kill"        // Redis SIGKILLed, restarted from its AOF after up to 2s
	faultRedisOOM    = "redis_oom"         // Redis at maxmemory with noeviction for up to 6s
	faultFailover    = "cluster_failover"  // a cluster master SIGKILLed, its replica promoted
	faultPartition   = "partition"         // a slave cut off from Redis or the work API for longer than a lease
	faultClock       = "clock_off"         // the clock slave's clock set 2 to 15 minutes off
	faultAPIRestart  = "api_slave_restart" // the work API's slave SIGKILLed, restarted after up to 3s
)

// allFaults orders the figures' line.
var allFaults = []string{faultSlaveKill, faultSlaveFreeze, faultMasterKill, faultMySQLCut, faultMySQLRO,
	faultRedisKill, faultRedisOOM, faultFailover, faultPartition, faultClock, faultAPIRestart}

// faultsOf lists the faults a topology meets: a Cluster's Redis is failed
// over rather than killed, and its direct slaves reach its nodes by the
// addresses the nodes announce, which no proxy stands between.
func faultsOf(topo Topology) []string {
	if topo == Cluster {
		return []string{faultSlaveKill, faultSlaveFreeze, faultMasterKill, faultMySQLCut, faultMySQLRO,
			faultRedisOOM, faultFailover, faultPartition, faultClock, faultAPIRestart}
	}
	return []string{faultSlaveKill, faultSlaveFreeze, faultMasterKill, faultMySQLCut, faultMySQLRO,
		faultRedisKill, faultRedisOOM, faultPartition, faultClock, faultAPIRestart}
}

// fault is one fault as it happened. A fault that may lose Redis's
// writes has a loss window: writes in it may be lost, and a URL fetched
// in it may be fetched again, a host's requests in it closer than the
// delay.
type fault struct {
	kind, target, detail string
	from, to             time.Time
	lossFrom, lossTo     time.Time // zero: no data lost
}

func (r *Round) record(f fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
	r.log.Info("fault", "kind", f.kind, "target", f.target, "detail", f.detail,
		"for", f.to.Sub(f.from).Round(time.Millisecond))
}

// lossWindows returns the windows in which Redis may have lost writes.
func (r *Round) lossWindows() [][2]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]time.Time
	for _, f := range r.faults {
		if !f.lossFrom.IsZero() {
			out = append(out, [2]time.Time{f.lossFrom, f.lossTo})
		}
	}
	return out
}

// inject makes faults one after another, a pause of 0.3 to 1.5 s between
// two, until stop is closed; each fault is healed before the next. The
// kinds come in rounds, each a random order of every kind, so that a
// crawl meets most of them.
func (r *Round) inject(stop <-chan struct{}) {
	var deck []string
	for {
		select {
		case <-stop:
			return
		case <-time.After(between(r.rng, 300*time.Millisecond, 1500*time.Millisecond)):
		}
		select {
		case <-stop:
			return
		default:
		}
		if len(deck) == 0 {
			deck = faultsOf(r.topo)
			r.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck = deck[1:]
		f, err := r.fault(kind)
		if err != nil {
			r.t.Errorf("crawl %d (%s): fault %s: %v", r.n, r.topo, kind, err)
			return
		}
		r.record(f)
	}
}

// fault makes one fault of kind and heals it.
func (r *Round) fault(kind string) (fault, error) {
	f := fault{kind: kind, from: time.Now()}
	var err error
	switch kind {
	case faultSlaveKill:
		p := r.slaves[r.rng.IntN(len(r.slaves))]
		f.target = p.name
		p.kill()
		time.Sleep(between(r.rng, 200*time.Millisecond, 3*time.Second))
		err = p.start()
	case faultAPIRestart:
		f.target = r.api.name
		r.api.kill()
		time.Sleep(between(r.rng, 200*time.Millisecond, 3*time.Second))
		err = r.api.start()
	case faultMasterKill:
		f.target = r.master.name
		r.master.kill()
		time.Sleep(between(r.rng, 300*time.Millisecond, 3*time.Second))
		err = r.master.start()
	case faultSlaveFreeze:
		p := r.slaves[r.rng.IntN(len(r.slaves))]
		f.target = p.name
		if err = p.signal(syscall.SIGSTOP); err == nil {
			time.Sleep(between(r.rng, 500*time.Millisecond, 2*leaseDuration))
			err = p.signal(syscall.SIGCONT)
		}
	case faultMySQLCut:
		f.target = "mysql"
		r.mysqlProxy.SetDown(true)
		time.Sleep(between(r.rng, time.Second, 8*time.Second))
		r.mysqlProxy.SetDown(false)
	case faultMySQLRO:
		f.target = "mysql"
		ctx, cancel := ctxFor(30 * time.Second)
		defer cancel()
		if err = r.s.mysql.writable(ctx, r.dbName, false); err == nil {
			time.Sleep(between(r.rng, time.Second, 8*time.Second))
			err = r.s.mysql.writable(ctx, r.dbName, true)
		}
	case faultPartition:
		var p *tcpproxy.Proxy
		targets := len(r.redisProxies) + 1
		if k := r.rng.IntN(targets); k < len(r.redisProxies) {
			p, f.target = r.redisProxies[k], r.slaves[k].name+" from redis"
		} else {
			p, f.target = r.apiProxy, apiPartition
		}
		p.SetPartitioned(true)
		time.Sleep(leaseDuration + between(r.rng, time.Second, 6*time.Second))
		p.SetPartitioned(false)
	case faultClock:
		off := clockOffset(r.rng)
		f.target, f.detail = "clock", off.String()
		r.clock.off.Store(int64(off))
	case faultRedisKill:
		f.target = "redis"
		r.s.redis.Kill()
		killed := time.Now()
		time.Sleep(between(r.rng, 200*time.Millisecond, 2*time.Second))
		err = r.s.redis.Restart()
		// an AOF written every second: up to about 2s of writes lost
		f.lossFrom, f.lossTo = killed.Add(-2*time.Second), time.Now().Add(leaseDuration)
	case faultRedisOOM:
		f.target = "redis"
		err = r.oom(between(r.rng, time.Second, 6*time.Second))
	case faultFailover:
		f.lossFrom, f.lossTo, f.target, f.detail, err = r.failover()
	default:
		err = fmt.Errorf("unknown fault %q", kind)
	}
	f.to = time.Now()
	return f, err
}

// oom sets maxmemory below what each Redis master uses (noeviction: every
// write is refused with OOM) for d, then lifts it.
func (r *Round) oom(d time.Duration) error {
	ctx, cancel := ctxFor(30*time.Second + d)
	defer cancel()
	var nodes []*redis.Client
	if r.topo == Single {
		c := redis.NewClient(&redis.Options{Addr: r.s.redis.Addr})
		defer c.Close()
		nodes = append(nodes, c)
	} else {
		masters, err := r.s.rc.Masters(ctx)
		if err != nil {
			return err
		}
		for _, m := range masters {
			nodes = append(nodes, r.s.rc.Node(m).Client)
			if err := r.s.rc.Node(m).Client.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				return err
			}
		}
	}
	for _, c := range nodes {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		used, err := strconv.ParseInt(testutil.InfoField(info, "used_memory"), 10, 64)
		if err != nil {
			return fmt.Errorf("used_memory: %w", err)
		}
		if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(max(used/2, 1), 10)).Err(); err != nil {
			return err
		}
	}
	time.Sleep(d)
	var err error
	for _, c := range nodes {
		if e := c.ConfigSet(ctx, "maxmemory", "0").Err(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// failover kills a cluster master (half the time with its replica cut off
// for 200ms first, so that the kill loses writes for certain), waits for
// its replica's promotion, and restarts it, to rejoin as a replica.
func (r *Round) failover() (lossFrom, lossTo time.Time, target, detail string, err error) {
	rc := r.s.rc
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	masters, err := rc.Masters(ctx)
	if err != nil {
		return
	}
	target = masters[r.rng.IntN(len(masters))]
	lossFrom = time.Now().Add(-time.Second)
	if r.rng.IntN(2) == 0 {
		detail = "replica behind"
		err = rc.KillBehind(ctx, target, func() { time.Sleep(200 * time.Millisecond) })
	} else {
		err = rc.Kill(target)
	}
	if err != nil {
		return
	}
	promoted, err := rc.WaitFailover(ctx, target)
	if err != nil {
		return
	}
	lossTo = time.Now().Add(leaseDuration)
	detail += " promoted " + promoted
	if err = rc.Restart(target); err != nil {
		return
	}
	err = rc.WaitHealthy(ctx)
	return
}

// apiPartition is the target of a partition of the work API's slave.
const apiPartition = "a1 from the work API"

// between is a duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
