package masterd

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/retry"
)

// recoverer takes back leases whose deadline passed.
type recoverer struct {
	front *frontier.Redis
	owned func() []int // the shards this master serves
	every time.Duration
	log   *slog.Logger
	rl    *ratelog.Logger
	// recovered, when set, counts leases taken back (metrics)
	recovered func(reason string, n int)
}

func (r *recoverer) run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range 100 { // at most 100,000 a tick
			n, err := r.front.RecoverExpiredShards(ctx, 1000, r.owned())
			if err != nil {
				if ctx.Err() == nil {
					r.rl.Log(ctx, slog.LevelWarn, "recover", "recover expired leases", "err", err)
				}
				break
			}
			if n > 0 {
				r.log.Warn("expired leases taken back", "count", n)
				if r.recovered != nil {
					r.recovered(events.LostExpired, n)
				}
			}
			if n < 1000 {
				break
			}
		}
	}
}

// monitor declares slaves dead when their heartbeats stop, takes back their
// leases at once, and samples heartbeats into the event stream.
type monitor struct {
	front       *frontier.Redis
	stream      *frontier.Stream
	crawl       string // the crawl a sample is recorded for, whatever the slave's heartbeat says
	deadAfter   time.Duration
	sampleEvery time.Duration
	owned       func() []int // the shards this master serves: shard 0's watches
	log         *slog.Logger
	rl          *ratelog.Logger
	// recovered, when set, counts leases taken back (metrics)
	recovered func(reason string, n int)
}

func (m *monitor) run(ctx context.Context) {
	tick := min(m.deadAfter/4, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastSample := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.prune(ctx)
		if !slices.Contains(m.owned(), 0) {
			continue // shard 0's master watches the slaves
		}
		now, err := m.front.Now(ctx)
		if err != nil {
			m.rl.Log(ctx, slog.LevelWarn, "monitor", "monitor slaves", "err", err)
			continue
		}
		slaves, err := m.front.Registered(ctx)
		if err != nil {
			m.rl.Log(ctx, slog.LevelWarn, "monitor", "monitor slaves", "err", err)
			continue
		}
		sample := now.Sub(lastSample) >= m.sampleEvery
		for _, s := range slaves {
			if s.Gone {
				if now.Sub(s.LastSeen) <= m.deadAfter {
					// registered by a claim moments ago: its heartbeat is
					// on its way
					continue
				}
				// it left (its leave is recorded) or was retired: drop it
				// from the registry, as a death if it still holds leases
				n, err := m.front.RetireGone(ctx, s.Slave)
				if err != nil {
					m.rl.Log(ctx, slog.LevelWarn, "monitor", "retire gone slave", "slave", s.Slave, "err", err)
				} else if n > 0 && m.recovered != nil {
					m.recovered(events.LostSlaveDead, n)
				}
				continue
			}
			if now.Sub(s.LastSeen) > m.deadAfter {
				n, err := m.front.RecoverSlave(ctx, s.Slave)
				if err != nil {
					m.rl.Log(ctx, slog.LevelWarn, "monitor", "recover dead slave", "slave", s.Slave, "err", err)
					continue
				}
				m.log.Warn("slave dead: heartbeats missed", "slave", s.Slave, "last_seen", s.LastSeen, "leases_taken_back", n)
				if m.recovered != nil && n > 0 {
					m.recovered(events.LostSlaveDead, n)
				}
				continue
			}
			if sample {
				// the heartbeat key is the slave's to write: of its
				// JSON only the counters are taken, the slave (the
				// registry's id), crawl and time are the master's
				hb := s.Heartbeat
				hb.Crawl, hb.At = m.crawl, s.LastSeen.UnixMilli()
				if ev, err := frontier.NewEvent(&hb); err == nil {
					if err := m.stream.Append(ctx, ev); err != nil {
						m.rl.Log(ctx, slog.LevelWarn, "sample", "sample heartbeat", "err", err)
					}
				}
			}
		}
		if sample {
			lastSample = now
		}
	}
}

// prune drops from the registries of the shards this master serves the
// members that are no slave (a slave's raw ZADDs: PruneRegistry), and
// records that it did.
func (m *monitor) prune(ctx context.Context) {
	n, err := m.front.PruneRegistry(ctx, m.owned())
	if err != nil {
		m.rl.Log(ctx, slog.LevelWarn, "prune", "prune the slave registry", "err", err)
	}
	if n == 0 {
		return
	}
	m.log.Warn("slave registry: dropped members that are no slave", "count", n)
	ev, err := frontier.NewEvent(&events.Exception{Crawl: m.crawl, Kind: events.KindInvalidInput, At: time.Now().UnixMilli(),
		Message: fmt.Sprintf("slave registry: %d members with no heartbeat, lease or event stream dropped "+
			"(a slave's Redis user wrote them: see docs/deploy.md on direct slaves)", n)})
	if err == nil {
		if err := m.stream.Append(ctx, ev); err != nil {
			m.rl.Log(ctx, slog.LevelWarn, "prune", "record the registry's pruning", "err", err)
		}
	}
}

// finisher decides when the crawl is finished and logs progress. A crawl
// that never had work (nothing seen, done or failed) is not finished: the
// finisher waits for its seeds, and says so once.
type finisher struct {
	front         *frontier.Redis
	owned         func() []int // the shards this master serves: shard 0's decides
	quiescence    time.Duration
	progressEvery time.Duration
	log           *slog.Logger
	rl            *ratelog.Logger
	finished      chan struct{}
	// limited: the crawl has limits (crawl.max_pages, max_items,
	// max_duration); maxDuration counts from start, this master's
	limited     bool
	maxDuration time.Duration
	start       time.Time
	// over: max_duration was recorded (LimitOver); limitIdle: since when
	// a limit is reached with no page in flight (zero: not now)
	over      bool
	limitIdle time.Time
}

// finishBusyEvery is how often the finisher checks a crawl that has work
// queued, in flight or waiting for retry: the finish can come no sooner
// than the quiescence window after the crawl goes quiet, so the window's
// own checks (a third of it) run only once it is quiet, and an idle crawl
// waiting on a slow page costs Redis two checks a second.
const finishBusyEvery = 500 * time.Millisecond

func (f *finisher) run(ctx context.Context) {
	quiet := min(f.quiescence/3, finishBusyEvery)
	t := time.NewTimer(quiet)
	defer t.Stop()
	lastLog := time.Now()
	announced, hadWork, waitLogged := false, false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var done bool
		var err error
		var st *frontier.Stats // read this tick, when it was
		next := finishBusyEvery
		if slices.Contains(f.owned(), 0) {
			if !hadWork {
				// a crawl is finished only after it had work: a master
				// started before its seeds waits for them
				var s frontier.Stats
				if s, err = f.front.Stats(ctx); err == nil {
					st, hadWork = &s, s.Seen > 0 || s.Done > 0 || s.Failed > 0
					if !hadWork && !waitLogged {
						waitLogged = true
						f.log.Info("waiting for seeds: the crawl has no work yet (master seed URL...)")
					}
				}
			}
			if hadWork {
				var fs frontier.FinishState
				fs, err = f.front.FinishCheck(ctx, f.quiescence)
				done = fs == frontier.Finished
				if fs == frontier.Quiet {
					next = quiet
				}
				if err == nil && !done && f.limited {
					var atLimit bool
					done, atLimit, err = f.checkLimits(ctx)
					if atLimit {
						next = quiet
					}
				}
			}
		} else {
			// another master decides; this one learns it
			var s frontier.Stats
			s, err = f.front.Stats(ctx)
			st, done = &s, s.Finished
		}
		t.Reset(next)
		if err != nil {
			f.rl.Log(ctx, slog.LevelWarn, "finish", "check finished", "err", err)
			continue
		}
		if time.Since(lastLog) >= f.progressEvery {
			lastLog = time.Now()
			if st == nil {
				if s, err := f.front.Stats(ctx); err == nil {
					st = &s
				}
			}
			if st != nil {
				if only, due := st.OnlyRetries(time.Now()); only {
					f.log.Info("progress: only retries left", "done", st.Done, "retry", st.Retry,
						"next_retry_in", due.Round(100*time.Millisecond), "failed", st.Failed, "slaves", st.SlavesAlive)
				} else {
					f.log.Info("progress", "done", st.Done, "queued", st.Queued, "in_flight", st.InFlight,
						"retry", st.Retry, "failed", st.Failed, "slaves", st.SlavesAlive, "pages_per_sec", round1(st.PagesPerSec))
				}
			}
		}
		if done && !announced {
			announced = true
			f.log.Info("crawl finished")
			close(f.finished)
		}
	}
}

// checkLimits ends the crawl by its limits: it records max_duration once
// this master ran that long (LimitOver), and once a limit is reached
// (claims take no page then) with no page in flight for the quiescence
// window (a claim that took its pages just before may not have leased
// them yet), marks the crawl finished by it (EndByLimit). atLimit: a limit
// is reached.
func (f *finisher) checkLimits(ctx context.Context) (done, atLimit bool, err error) {
	if f.maxDuration > 0 && !f.over && time.Since(f.start) >= f.maxDuration {
		if err := f.front.LimitOver(ctx, frontier.LimitMaxDuration); err != nil {
			return false, false, err
		}
		f.over = true
		f.log.Info("crawl.max_duration reached: no page is claimed any more", "max_duration", f.maxDuration)
	}
	reached, err := f.front.LimitReached(ctx)
	if err != nil || reached == "" {
		f.limitIdle = time.Time{}
		return false, false, err
	}
	st, err := f.front.Stats(ctx)
	if err != nil {
		return false, true, err
	}
	if st.InFlight > 0 {
		f.limitIdle = time.Time{}
		return false, true, nil
	}
	if f.limitIdle.IsZero() {
		f.limitIdle = time.Now()
		return false, true, nil
	}
	if time.Since(f.limitIdle) < f.quiescence {
		return false, true, nil
	}
	if err := f.front.EndByLimit(ctx, reached); err != nil {
		return false, true, err
	}
	f.log.Info("crawl ended by its limit", "limit", reached, "done", st.Done, "queued", st.Queued)
	return true, true, nil
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// sink moves events from the crawl's stream into MySQL. An entry is
// acknowledged (and deleted) only after the transaction holding it
// commits, so a master crash or a MySQL outage loses nothing; inserts are
// idempotent on the entry id, so a redelivered entry is not stored twice.
// Each event is stored for the crawl and the slave of the stream it came
// from (bind); a forged one is replaced by a forged_event exception.
type sink struct {
	stream   *frontier.Stream
	crawl    string // the crawl whose streams it reads
	store    inserter
	batch    int // most events in one transaction (one entry's, if more)
	consumer string
	log      *slog.Logger
	rl       *ratelog.Logger
	// now is the master's clock that event times are checked against;
	// nil = time.Now
	now func() time.Time
	// stored, when set, counts stored events by type (metrics)
	stored func(batch []events.Envelope)
	// forged, when set, counts a forged event by the slave it is recorded
	// for and the field that disagreed (metrics)
	forged func(slave, field string)
	// perEntry is the events per stream entry of the last read (float64
	// bits), which sizes the next (readCount); atomic, as drain and run
	// overlap when the master stops
	perEntry atomic.Uint64
}

type inserter interface {
	Insert(ctx context.Context, batch []events.Envelope) error
}

// sinkGather is how long the sink lets events gather after a short read,
// so a slow crawl costs a few stream reads a second, not three commands an
// event; the events wait safely in the stream meanwhile.
const sinkGather = 250 * time.Millisecond

// A sink takes over the entries another master read and did not
// acknowledge (it died, or gave up the shard) once they have been idle
// this long, looking every staleEvery.
const (
	staleIdle  = 30 * time.Second
	staleEvery = 10 * time.Second
)

func (s *sink) run(ctx context.Context) {
	pending := true // first redeliver what a previous run read but never stored
	lastStale := time.Now()
	for ctx.Err() == nil {
		if time.Since(lastStale) >= staleEvery {
			lastStale = time.Now()
			if n, err := s.stream.ClaimStale(ctx, s.consumer, staleIdle); err == nil && n > 0 {
				s.log.Info("took over events another master read and did not store", "count", n)
				pending = true
			}
		}
		count := s.readCount()
		n, err := s.once(ctx, pending, time.Second, count)
		if err != nil {
			continue
		}
		if pending && n == 0 {
			pending = false
		}
		if !pending && n < count {
			retry.Sleep(ctx, sinkGather)
		}
	}
}

// readCount is how many entries to read from each stream so that a read
// brings about one transaction's events per stream: a script writes up to
// 200 events in one entry (a slave's whole ack batch), so reading batch
// entries could bring 200 times more.
func (s *sink) readCount() int {
	per := math.Float64frombits(s.perEntry.Load())
	if per <= 1 {
		return s.batch
	}
	return max(1, int(float64(s.batch)/per))
}

// once reads up to count entries per stream and stores their events in
// transactions of at most s.batch events (whole entries; one entry's
// events if it holds more), acknowledging each transaction's entries
// after its commit; it retries an insert until it works or ctx ends. It
// returns the number of entries read.
func (s *sink) once(ctx context.Context, pending bool, block time.Duration, count int) (int, error) {
	entries, err := s.stream.Read(ctx, s.consumer, count, block, pending)
	if err != nil {
		if ctx.Err() == nil {
			s.rl.Log(ctx, slog.LevelWarn, "sink-read", "read event stream", "err", err)
			retry.Sleep(ctx, time.Second)
		}
		return 0, err
	}
	if len(entries) == 0 {
		return 0, nil
	}
	// the events of one stream entry come together and share its id
	var read int
	for i := range entries {
		if i == 0 || entries[i].StreamID != entries[i-1].StreamID {
			read++
		}
	}
	s.perEntry.Store(math.Float64bits(float64(len(entries)) / float64(read)))
	batch := make([]events.Envelope, 0, min(len(entries), s.batch))
	var ids []string
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	for i, e := range entries {
		if len(ids) == 0 || ids[len(ids)-1] != e.StreamID {
			ids = append(ids, e.StreamID)
		}
		src := sourceOf(s.crawl, e.StreamID)
		env, err := events.Decode(e.ID, e.Type, e.Data)
		if err != nil {
			s.rl.Log(ctx, slog.LevelError, "sink-decode:"+src.slave, "dropping undecodable event",
				"slave", src.slave, "id", e.ID, "err", err)
		} else {
			if fg := bind(&env, src, now); fg != nil {
				s.refuse(ctx, &env, src, fg, now)
			}
			batch = append(batch, env)
		}
		// store at an entry's end once the next entry would not fit
		last := i == len(entries)-1
		if !last && entries[i+1].StreamID == e.StreamID {
			continue
		}
		if !last && len(batch)+entryLen(entries[i+1:]) <= s.batch {
			continue
		}
		if err := s.store1(ctx, batch, ids); err != nil {
			return 0, err
		}
		batch, ids = batch[:0], ids[:0]
	}
	return read, nil
}

// refuse replaces the forged event env with its forged_event exception,
// counts it and logs it (at most every 30s a slave).
func (s *sink) refuse(ctx context.Context, env *events.Envelope, src source, fg *forgery, now time.Time) {
	s.rl.Log(ctx, slog.LevelWarn, "sink-forged:"+fg.slave, "forged event not stored: a slave's event names another crawl or slave, or a time ahead",
		"slave", fg.slave, "type", env.Type, "id", env.ID, "field", fg.field, "why", fg.msg)
	if s.forged != nil {
		s.forged(fg.slave, fg.field)
	}
	*env = forgedException(*env, src, fg, now)
}

// entryLen is the number of events of the entry entries starts with.
func entryLen(entries []frontier.Entry) int {
	n := 1
	for n < len(entries) && entries[n].StreamID == entries[0].StreamID {
		n++
	}
	return n
}

// store1 inserts batch in one transaction, retrying until it works or ctx
// ends, then acknowledges the entries ids that held it.
func (s *sink) store1(ctx context.Context, batch []events.Envelope, ids []string) error {
	for i := 1; ; i++ {
		err := s.store.Insert(ctx, batch)
		if err == nil {
			if i > 1 {
				s.rl.Reset("sink-insert")
				s.log.Info("mysql back: events stored", "count", len(batch), "after_attempts", i)
			}
			if s.stored != nil {
				s.stored(batch)
			}
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.rl.Log(ctx, slog.LevelWarn, "sink-insert", "store events in mysql; keeping them in the stream", "count", len(batch), "err", err)
		retry.Sleep(ctx, retry.Backoff(i))
	}
	for i := 1; ; i++ {
		err := s.stream.Ack(ctx, ids...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.rl.Log(ctx, slog.LevelWarn, "sink-ack", "ack events", "err", err)
		retry.Sleep(ctx, retry.Backoff(i))
	}
}

// drain stores everything left in the stream, bounded by limit.
func (s *sink) drain(ctx context.Context, limit time.Duration) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	for _, pending := range []bool{true, false} {
		for {
			n, err := s.once(dctx, pending, -1, s.readCount())
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
	}
	left, err := s.stream.Len(dctx)
	if err == nil && left > 0 {
		return fmt.Errorf("%d events left in the stream", left)
	}
	return err
}

// owner keeps this master's share of the crawl's shards (frontier.Redis.Own):
// it renews every third of the lease and publishes the shards it holds.
type owner struct {
	front *frontier.Redis
	id    string
	lease time.Duration
	log   *slog.Logger
	rl    *ratelog.Logger
	held  atomic.Pointer[[]int]
}

// owned returns the shards held now.
func (o *owner) owned() []int {
	if p := o.held.Load(); p != nil {
		return *p
	}
	return nil
}

// once renews and rebalances; it logs when the shards held change.
func (o *owner) once(ctx context.Context) error {
	got, err := o.front.Own(ctx, o.id, o.lease)
	if err != nil {
		return err
	}
	if !slices.Equal(got, o.owned()) {
		o.log.Info("shards served", "master", o.id, "shards", got, "of", o.front.NumShards())
	}
	o.held.Store(&got)
	return nil
}

func (o *owner) run(ctx context.Context) {
	t := time.NewTicker(o.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := o.once(ctx); err != nil {
			// keep serving what it holds until the lease would run out
			o.rl.Log(ctx, slog.LevelWarn, "own", "renew shard leases", "err", err)
		}
	}
}
