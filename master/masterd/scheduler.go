package masterd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// Schedule is one recrawl schedule of the crawl.
type Schedule struct {
	// Name is "" for the crawl's own schedule (crawl.schedule), else the
	// rule set's name. Names are unique within a crawl.
	Name string
	// Spec is the expression as written: "@daily", "0 */6 * * *".
	Spec string
	// Sched is Spec parsed by rules.ParseSchedule; nil schedules are skipped.
	Sched cron.Schedule
}

// ScheduleState is a recrawl schedule as the dashboard shows it. Its fields
// match admin.ScheduleView, so one converts to the other.
type ScheduleState struct {
	Name string // "" = the crawl's (config); else the rule set
	Spec string
	// LastRun is the latest slot claimed by any master (known to this
	// one); zero = never.
	LastRun time.Time
	// NextRun is the next slot to fire; it is in the past while a due slot
	// waits for MySQL to come back.
	NextRun time.Time
}

// reseeder re-seeds the crawl: it force-enqueues the seed URLs of the
// schedule name ("" = the whole crawl's seeds, else the seeds the rule set
// name matches) and returns how many it enqueued.
type reseeder interface {
	Reseed(ctx context.Context, name string) (int, error)
}

// runStore records fired slots (master/store.Store).
type runStore interface {
	ClaimRun(ctx context.Context, crawl, name, spec string, due time.Time, master string) (claimed bool, err error)
	SetRunSeeds(ctx context.Context, crawl, name string, due time.Time, seeds int) error
	LastRuns(ctx context.Context, crawl string) (map[string]time.Time, error)
}

const (
	// scheduleMaxWait bounds the scheduler's sleep, so it picks up changed
	// schedules (rule file edits) and other masters' runs.
	scheduleMaxWait = 30 * time.Second
	// scheduleRetry is the sleep after a store or re-seeding error.
	scheduleRetry = 5 * time.Second
	// scheduleMinWait keeps a wake that comes a hair early from spinning.
	scheduleMinWait = 10 * time.Millisecond
	// scheduleMaxSteps bounds the slots walked from the last run to now.
	scheduleMaxSteps = 10000
)

// scheduler fires the crawl's recrawl schedules: at each slot it re-seeds
// the crawl (or a rule set's seeds).
//
// Each slot fires once across restarts and masters: a slot is claimed in
// MySQL (store.ClaimRun, a unique key on crawl, schedule name and slot) and
// only the master whose claim inserted the row re-seeds. The slot is the
// scheduled time, not the wake time, so every master computes the same key.
//
// Which slot is due: at each wake the scheduler reads the latest claimed
// slot of each schedule (store.LastRuns, also picking up other masters'
// runs) and fires only the latest slot in (last run, now]; the earlier
// slots missed while no master was up are skipped. A schedule that never
// ran counts from when this master first saw it: slots before that never
// fire, and nothing is written for them. A schedule whose spec changes
// while the master runs also counts from the change; across a restart the
// new spec counts from the last recorded run, whatever its spec.
//
// Failures: a slot whose claim fails (MySQL down) stays due and is claimed
// at the next wake. A claimed slot whose re-seeding fails is kept in memory
// and re-seeded at the next wakes until it works (its row's seeds stays
// NULL until then), then its seed count is recorded; a newer slot claimed
// meanwhile replaces it, as both re-seed the same URLs. So a slot fires at
// most once, and exactly once unless the claiming master stops between the
// claim and a successful re-seeding: then that slot is lost (seeds stays
// NULL) and the schedule's next slot fires as usual.
//
// For @every schedules, slots run from the last recorded one (or from when
// the schedule was first seen), so two masters that first see a new @every
// schedule at different seconds compute different slots; the one that
// fires first records its slot and the other adopts it at its next wake
// (it reads LastRuns before firing), so only a claim race within that
// window could fire twice.
type scheduler struct {
	crawl, master string
	// schedules returns the current schedules (config and rule files); it
	// may change between calls and must be safe for concurrent use (Views
	// calls it too).
	schedules func() []Schedule
	store     runStore
	seed      reseeder
	now       func() time.Time
	log       *slog.Logger
	rl        *ratelog.Logger
	onFire    func() // optional: called after each successful re-seeding

	mu     sync.Mutex
	loaded bool                      // runs was read at least once
	runs   map[string]time.Time      // the last LastRuns answer
	state  map[string]*scheduleState // by schedule name
}

// scheduleState is what the scheduler knows of one schedule.
type scheduleState struct {
	spec  string    // the spec after counts from
	after time.Time // slots after this one count; a fired or claimed slot, or when first seen
	last  time.Time // the latest slot claimed by any master; zero = none known
	// pending is a slot this master claimed whose re-seeding or seed count
	// is not done yet; nil = none.
	pending *pendingRun
}

// pendingRun is a claimed slot being fired.
type pendingRun struct {
	due    time.Time
	seeds  int
	seeded bool // Reseed succeeded; only SetRunSeeds is left
}

// run fires schedules until ctx ends.
func (s *scheduler) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(s.tick(ctx))
	}
}

// tick fires the due slots and returns how long to sleep.
func (s *scheduler) tick(ctx context.Context) time.Duration {
	now := s.now()
	retry := false
	runs, err := s.store.LastRuns(ctx, s.crawl)
	if err != nil {
		if ctx.Err() != nil {
			return scheduleRetry
		}
		s.rl.Log(ctx, slog.LevelWarn, "schedule-read", "read last scheduled runs", "err", err)
		retry = true
	}
	scheds := s.schedules()
	s.mu.Lock()
	if err == nil {
		s.loaded, s.runs = true, runs
	}
	loaded := s.loaded
	if loaded {
		s.sync(scheds, now)
	}
	s.mu.Unlock()
	if !loaded {
		// Without the last runs a missed slot would be taken for a new
		// schedule's past and skipped: wait for them.
		return scheduleRetry
	}

	for _, sc := range scheds {
		if sc.Sched == nil {
			continue
		}
		if !s.fire(ctx, sc, now) {
			retry = true
		}
		if ctx.Err() != nil {
			return scheduleRetry
		}
	}

	wait := scheduleMaxWait
	if retry {
		wait = scheduleRetry
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range scheds {
		st := s.state[sc.Name]
		if sc.Sched == nil || st == nil {
			continue
		}
		if st.pending != nil {
			wait = min(wait, scheduleRetry)
		}
		// An overdue slot (its claim failed) waits for the retry.
		if next := nextSlot(sc.Sched, st.after); next.After(now) {
			wait = min(wait, next.Sub(now))
		}
	}
	return max(wait, scheduleMinWait)
}

// sync brings the state in line with the current schedules and the last
// runs read from MySQL. s.mu is held.
func (s *scheduler) sync(scheds []Schedule, now time.Time) {
	if s.state == nil {
		s.state = map[string]*scheduleState{}
	}
	seen := make(map[string]bool, len(scheds))
	for _, sc := range scheds {
		seen[sc.Name] = true
		last, ran := s.runs[sc.Name]
		st := s.state[sc.Name]
		switch {
		case st == nil && ran:
			st = &scheduleState{spec: sc.Spec, after: last, last: last}
		case st == nil:
			st = &scheduleState{spec: sc.Spec, after: now}
		case st.spec != sc.Spec:
			st.spec = sc.Spec
			st.after = latest(st.after, now)
		}
		s.state[sc.Name] = st
		if ran {
			st.last = latest(st.last, last)
			st.after = latest(st.after, last)
		}
	}
	for name := range s.state {
		if !seen[name] {
			delete(s.state, name) // schedule removed; counts anew if it comes back
		}
	}
}

// fire claims and fires sc's due slot, if any, and finishes a pending run.
// It reports false when something failed and should be retried soon.
func (s *scheduler) fire(ctx context.Context, sc Schedule, now time.Time) bool {
	s.mu.Lock()
	st := s.state[sc.Name]
	due, ok := latestDue(sc.Sched, st.after, now)
	s.mu.Unlock()
	if ok {
		claimed, err := s.store.ClaimRun(ctx, s.crawl, sc.Name, sc.Spec, due, s.master)
		if err != nil {
			if ctx.Err() == nil {
				s.rl.Log(ctx, slog.LevelWarn, "schedule-claim", "claim scheduled recrawl",
					"name", sc.Name, "due", due, "err", err)
			}
			return false
		}
		s.mu.Lock()
		st.after = due
		st.last = latest(st.last, due)
		if claimed {
			if p := st.pending; p != nil && !p.seeded {
				s.log.Warn("scheduled recrawl never re-seeded: a newer slot replaces it",
					"name", sc.Name, "due", p.due, "newer", due)
			}
			st.pending = &pendingRun{due: due}
		}
		s.mu.Unlock()
	}

	s.mu.Lock()
	p := st.pending
	s.mu.Unlock()
	if p == nil {
		return true
	}
	if !p.seeded {
		n, err := s.seed.Reseed(ctx, sc.Name)
		if err != nil {
			if ctx.Err() == nil {
				s.rl.Log(ctx, slog.LevelWarn, "schedule-reseed", "re-seed scheduled recrawl; retrying",
					"name", sc.Name, "due", p.due, "err", err)
			}
			return false
		}
		p.seeds, p.seeded = n, true
		s.log.Info("scheduled recrawl", "name", sc.Name, "due", p.due, "seeds", n)
		if s.onFire != nil {
			s.onFire()
		}
	}
	if err := s.store.SetRunSeeds(ctx, s.crawl, sc.Name, p.due, p.seeds); err != nil {
		if ctx.Err() == nil {
			s.rl.Log(ctx, slog.LevelWarn, "schedule-seeds", "record scheduled recrawl seeds",
				"name", sc.Name, "due", p.due, "err", err)
		}
		return false
	}
	s.mu.Lock()
	if st.pending == p {
		st.pending = nil
	}
	s.mu.Unlock()
	return true
}

// Views returns the current schedules with their last and next runs, in
// the order the schedules func gives them.
func (s *scheduler) Views() []ScheduleState {
	now := s.now()
	scheds := s.schedules()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ScheduleState, 0, len(scheds))
	for _, sc := range scheds {
		v := ScheduleState{Name: sc.Name, Spec: sc.Spec}
		after := now // not seen yet: counts from now, unless it ran before
		if last, ok := s.runs[sc.Name]; ok {
			v.LastRun, after = last, last
		}
		if st := s.state[sc.Name]; st != nil {
			v.LastRun = st.last
			after = st.after
			if st.spec != sc.Spec {
				after = latest(after, now)
			}
		}
		if sc.Sched != nil {
			if due, ok := latestDue(sc.Sched, after, now); ok {
				v.NextRun = due // due, waiting for the next wake
			} else {
				v.NextRun = nextSlot(sc.Sched, after)
			}
		}
		if !v.LastRun.IsZero() {
			v.LastRun = v.LastRun.In(now.Location())
		}
		if !v.NextRun.IsZero() {
			v.NextRun = v.NextRun.In(now.Location())
		}
		out = append(out, v)
	}
	return out
}

// nextSlot is sched's first slot after t. Schedules run in the master's
// local time (rules.ParseSchedule), whatever t's location: a time read from
// MySQL is in UTC.
func nextSlot(sched cron.Schedule, t time.Time) time.Time {
	return sched.Next(t.In(time.Local))
}

// latestDue returns sched's latest slot in (after, now]; ok is false when
// there is none.
func latestDue(sched cron.Schedule, after, now time.Time) (due time.Time, ok bool) {
	first := nextSlot(sched, after)
	if first.IsZero() || first.After(now) {
		return time.Time{}, false
	}
	if cd, isEvery := sched.(cron.ConstantDelaySchedule); isEvery && cd.Delay > 0 {
		// @every: slots are first + k·Delay (whole seconds).
		return first.Add(now.Sub(first) / cd.Delay * cd.Delay), true
	}
	due = first
	for range scheduleMaxSteps {
		n := nextSlot(sched, due)
		if n.IsZero() || n.After(now) || !n.After(due) {
			return due, true
		}
		due = n
	}
	// Over scheduleMaxSteps slots missed: cron slots are absolute times,
	// so search back from now instead of walking on.
	return latestBefore(sched, due, now), true
}

// latestBefore returns sched's latest slot in [floor, now], floor being a
// slot, by looking back from now over windows that double.
func latestBefore(sched cron.Schedule, floor, now time.Time) time.Time {
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if !from.After(floor) {
			from = floor
		}
		due := nextSlot(sched, from)
		if due.IsZero() || due.After(now) {
			if from.Equal(floor) {
				return floor
			}
			continue
		}
		for range scheduleMaxSteps {
			n := nextSlot(sched, due)
			if n.IsZero() || n.After(now) || !n.After(due) {
				break
			}
			due = n
		}
		return due
	}
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
