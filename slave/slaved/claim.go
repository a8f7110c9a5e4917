package slaved

// Claiming: as many tasks as there are free workers, and the waits between
// claims (for acks to land, for the master's wake-up, for pages done).

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
)

// claimLoop claims tasks for its workers and starts a fetch for each,
// until ctx is cancelled. It keeps up to Concurrency fetches running and,
// besides them, a few leases claimed ahead (claimAhead): a claim takes
// time (a Redis round trip; through the work API a request the master
// serves), and workers freed while it runs would otherwise wait for it.
// A lease whose host has a fetch running may wait at the host's gate
// (hostGates) before it takes a worker, and is not counted against them.
func (s *Slave) claimLoop(ctx, fetchCtx context.Context, pool *sync.WaitGroup, acks *batcher[frontier.Completion]) {
	conc := s.cfg.Slave.Concurrency
	workers := make(chan struct{}, conc) // a token per running fetch
	freed := make(chan struct{}, 1)      // signalled when a lease is done
	var held, finished atomic.Int64      // leases claimed and not done; done in all
	// a lease waiting at its host's gate holds no worker: the claim loop
	// may claim for the worker it leaves free
	gates := newHostGates(func() { signal(freed) })
	maxHeld := 4 * conc // leases waiting at gates included
	batch := claimBatch(conc)
	ahead := claimAhead{max: conc / 2, batch: batch}
	if batch > 1 {
		// room for the batch held ahead (claimAhead.covers)
		ahead.max += batch
	}
	// want is the room: free workers, and leases to claim ahead
	want := func() int {
		h := int(held.Load())
		return min(conc+ahead.n(finished.Load())-(h-int(gates.waiting.Load())), maxHeld-h)
	}
	fail := 0
	s.claiming.Store(true)
	defer s.claiming.Store(false)
	for ctx.Err() == nil {
		n := want()
		if n <= 0 {
			// no room: the acker sends the acks meanwhile, since they
			// free host slots that other slaves may claim
			s.claiming.Store(false)
			select {
			case <-ctx.Done():
				return
			case <-freed:
			}
			s.claiming.Store(true)
			continue
		}
		if n < batch {
			// few workers are free: give others a moment to finish, so
			// that one call acks and claims for several; while the leases
			// claimed ahead keep the workers busy, a longer moment costs
			// no fetch
			d := claimGather
			if ahead.covers {
				d = batchGather
			}
			if !waitFreed(ctx, freed, d, func() bool { return want() >= batch }) {
				return
			}
			n = max(n, want())
		}
		claimStart := time.Now()
		res, err := s.claim(ctx, acks, n)
		took := time.Since(claimStart)
		s.met.ObserveClaim(took)
		leases, wait := res.Leases, res.Wait
		s.met.Claimed(len(leases))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fail++
			s.rl.Log(ctx, levelWarn, "claim", "claim failed; pausing", "err", err)
			retry.Sleep(ctx, retry.Backoff(fail))
			continue
		}
		ahead.claimed(took)
		if fail > 0 {
			s.log.Info("claiming again", "after_failures", fail)
			s.rl.Reset("claim")
			fail = 0
		}
		if res.RulesVersion != "" {
			s.rulesSeen(res.RulesVersion)
		}
		for _, l := range leases {
			s.track(l, claimStart, true) // pins the hosts' DNS entries before they are resolved
		}
		if s.dns != nil && len(leases) > 1 {
			// resolve the other tasks' hosts while the first ones fetch
			hosts := make([]string, 0, len(leases))
			for _, l := range leases {
				if h := leaseHost(l); h != "" {
					hosts = append(hosts, h)
				}
			}
			s.dns.Prefetch(hosts)
		}
		held.Add(int64(len(leases)))
		for _, l := range leases {
			pool.Add(1)
			go func() {
				defer pool.Done()
				defer func() {
					finished.Add(1)
					held.Add(-1)
					signal(freed)
				}()
				patience := min(max(2*time.Duration(s.fetchAvg.Load()), minGatePatience), maxGatePatience)
				defer gates.enter(fetchCtx, l.Host, patience)()
				workers <- struct{}{} // waits (in order) while conc fetches run
				defer func() { <-workers }()
				c := s.process(fetchCtx, l)
				if c.Outcome == frontier.Done || c.Outcome == frontier.Fail {
					s.pages.Add(1)
					s.met.Page(c.Outcome == frontier.Done)
				}
				acks.add(c)
			}()
		}
		if len(leases) == 0 || (len(leases) < n && wait != 0) {
			s.idleWait(ctx, wait)
		}
	}
}

// minGatePatience and maxGatePatience bound how long a lease waits at its
// host's gate (hostGates) for the fetch ahead of it: twice the average
// fetch, within these.
const (
	minGatePatience = 50 * time.Millisecond
	maxGatePatience = 2 * time.Second
)

// claimAhead sizes the leases a claim loop holds beyond its running
// fetches: as many as its workers finish in one claim's time (the pages
// done a second times a claim's duration, both moving averages), at most
// max. A slave whose claims are quick (Redis near by) claims one or two
// ahead; one whose claims wait on the work API's master claims as many as
// its workers free meanwhile, so they need not wait. A slave whose fetches
// are slow (a slow host, renders) finishes few pages a second and claims
// none ahead: leases do not wait behind a slow page while other slaves
// are idle.
//
// A slave whose workers finish a batch's worth of pages (claimBatch)
// within aheadHold holds that many more besides (covers), so that its
// claim loop can wait for a batch of workers to be free and claim for
// them in one call while the leases ahead keep them busy: a slave of few
// workers (a broad crawl's many slaves of 4) would otherwise call the
// frontier for every page or two, and each call has a fixed cost in Redis.
type claimAhead struct {
	max      int
	batch    int       // leases a claim call aims at (claimBatch)
	covers   bool      // the batch is held ahead: the claim loop may wait for it
	latency  float64   // seconds a claim takes
	rate     float64   // pages finished a second
	since    time.Time // start of the rate's current window
	finished int64     // pages finished at since
}

// claimBatch is how much room (free workers and leases to hold ahead) a
// claim waits for (at most batchGather, while the leases ahead cover it;
// else claimGather): a quarter of the concurrency, at least 8, at most
// twice the concurrency (a slave of 4 workers claims 8 at a time, half of
// them held ahead while the other half fetch). A slave of fewer than 4
// workers claims no batch (1): were its few workers all stuck on slow
// pages, the leases it held ahead would wait behind them, and a page that
// waits for the rest of the crawl would never end (TestRunBroadSmoke's
// slaves of 1 worker and its held page).
func claimBatch(conc int) int {
	if conc < 4 {
		return 1
	}
	return min(2*conc, max(8, conc/4))
}

// aheadHold bounds the average time a lease claimed ahead for a batch
// waits for a worker: a slave that finishes fewer than a batch in it
// claims no batch ahead (slow pages: its leases would wait behind them
// while other slaves are idle). 200 ms: a slave of 4 workers holds its
// batch of 8 from 40 pages a second. At 100 ms (80 a second) the 16
// slaves of 4 of the broad bench (88 pages a second each on a slow
// machine) often held none and called the frontier twice as often:
// 21,635 claims for 80,000 pages against 10,415, Redis 194-222 against
// 149-155 us a page.
const aheadHold = 200 * time.Millisecond

// aheadWindow is the shortest time over which claimAhead measures the rate.
const aheadWindow = 200 * time.Millisecond

// claimed records a claim's duration.
func (a *claimAhead) claimed(d time.Duration) {
	if a.latency == 0 {
		a.latency = d.Seconds()
		return
	}
	a.latency += (d.Seconds() - a.latency) / 4
}

// n returns how many leases to hold ahead, given the pages finished so far.
func (a *claimAhead) n(finished int64) int {
	now := time.Now()
	if a.since.IsZero() {
		a.since, a.finished = now, finished
	} else if dt := now.Sub(a.since); dt >= aheadWindow {
		a.rate += (float64(finished-a.finished)/dt.Seconds() - a.rate) / 2
		a.since, a.finished = now, finished
	}
	k := int(math.Round(a.rate * a.latency))
	a.covers = a.batch > 1 && a.rate*aheadHold.Seconds() >= float64(a.batch)
	if a.covers {
		k += a.batch
	}
	return min(a.max, k)
}

// waitFreed waits until ok() holds, a lease is freed again and again, for
// at most d; false when ctx ended.
func waitFreed(ctx context.Context, freed <-chan struct{}, d time.Duration, ok func() bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-freed:
		}
	}
	return true
}

// idleWait waits after a claim that found nothing (more) ready: claiming
// again at once would find none (an empty script call). The claim marked
// the shard (wait_until in Redis), so the call that makes a host claimable
// sooner than this slave would look announces work (frontier.WorkMessage,
// s.wake): a seed, links of another slave's page, a host slot freed, a
// lease taken back. So the slave sleeps until the earliest host's time
// (wait, a retry's due time included), else (wait negative: nothing
// queued, or every host busy) until the announcement, with
// slave.idle_poll as the backstop for a missed one; an idle slave costs
// Redis one claim per idle_poll however long it waits. It also wakes when
// one of its acks lands, or (withDone: its acks go with its claims) when
// one of its pages is done.
func (s *Slave) idleWait(ctx context.Context, wait time.Duration) {
	d := s.cfg.Slave.IdlePoll
	spread := d / 4
	if wait >= 0 && wait < d {
		// spread a little so slaves do not all wake at once for one host,
		// but not so much that a ready host waits long
		d, spread = wait, min(wait/4, hintSpread)
	}
	d += time.Duration(rand.Int64N(int64(spread) + int64(time.Millisecond)))
	// ... or until one of this slave's pages is done: its ack goes with
	// the next claim (one script for both)
	s.wait(ctx, d, s.done)
}

// hintSpread bounds the random extra wait after a claim's wait hint.
const hintSpread = 5 * time.Millisecond

// claim leases up to n tasks. The finished pages' completions waiting for
// the acker go with the claim (CompleteClaim): the host slots they free
// are this slave's to claim in the same script, before another slave's
// claim finds them, and one script serves both; on an error they go back
// to the acker.
func (s *Slave) claim(ctx context.Context, acks *batcher[frontier.Completion], n int) (frontier.ClaimResult, error) {
	opts := frontier.ClaimOptions{Render: s.canRender.Load()}
	cs := acks.take(maxAckBatch)
	if len(cs) == 0 {
		return s.front.ClaimWaitOpts(ctx, s.id, n, opts)
	}
	start := time.Now()
	// not cut short by a shutdown: the acks would be sent twice
	acked, res, err := s.front.CompleteClaim(context.WithoutCancel(ctx), s.id, cs, n, opts)
	if err != nil {
		acks.putBack(cs)
		return res, err
	}
	s.met.ObserveAck(time.Since(start))
	s.acksDone(cs, acked)
	return res, nil
}

// claimGather bounds how long the claim loop waits, when few workers are
// free, for more to finish (acks and claim in one script: claimLoop).
const claimGather = time.Millisecond

// batchGather bounds how long the claim loop waits for a batch of room
// while the leases it holds ahead keep its workers busy (claimAhead): a
// slave holds a batch ahead only when its workers finish one within
// aheadHold, so the batch is there in about that time.
const batchGather = aheadHold

// busyGather bounds how long a claim loop that found no free host slot
// gathers its pages' acks before it acks and claims (wait); the acker
// holds a small batch longer (ackHold), so the claim carries them.
const busyGather = 10 * time.Millisecond

// wakeAll makes the next claim ask every shard (frontier.Redis.WakeAll).
func (s *Slave) wakeAll() {
	if w, ok := s.front.(interface{ WakeAll() }); ok {
		w.WakeAll()
	}
}

// signal sets a signal channel of capacity one, if not set already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// wait waits up to d for one of this slave's acks to land (s.acked), for
// the master to announce queued work (s.wake), for done (nil: never), or
// for ctx to end. The claim loop passes s.done, signalled when one of its
// pages is done (its completion queued, to go with its next claim): a
// page done ends the wait after a gather time, a quarter of the average
// fetch (busyGather bounds it), so that the claim that follows acks the
// pages done meanwhile too: while every host with work is at its
// concurrency, only acks free slots, and one script per gather time acks
// and claims them, instead of a complete script per ack batch and claims
// that find nothing.
func (s *Slave) wait(ctx context.Context, d time.Duration, done <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
		return
	case <-s.acked:
		return
	case <-s.wake:
		// work was announced: the next claim asks every shard, also one
		// that a claim under way at the announcement marked quiet
		s.wakeAll()
		return
	case <-done:
	}
	g := min(max(claimGather, time.Duration(s.fetchAvg.Load()/4)), busyGather)
	retry.Sleep(ctx, g)
}
