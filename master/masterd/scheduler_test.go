package masterd

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// at is 2030-01-<day> hh:mm in the master's local time, in which schedules
// run (January: no DST change in common zones).
func at(day, hh, mm int) time.Time {
	return time.Date(2030, 1, day, hh, mm, 0, 0, time.Local)
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fakeSeeder counts Reseed calls by schedule name; the first fail calls
// fail.
type fakeSeeder struct {
	mu       sync.Mutex
	fail     int
	attempts map[string]int
	done     map[string]int // successful calls
	called   chan string    // if set, gets the name of each successful call
}

func newSeeder() *fakeSeeder {
	return &fakeSeeder{attempts: map[string]int{}, done: map[string]int{}}
}

const seedsPerRun = 5

func (f *fakeSeeder) Reseed(ctx context.Context, name string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[name]++
	if f.fail > 0 {
		f.fail--
		return 0, errors.New("redis down")
	}
	f.done[name]++
	if f.called != nil {
		f.called <- name
	}
	return seedsPerRun, nil
}

// calls returns the successful calls by name.
func (f *fakeSeeder) calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.done {
		out[k] = v
	}
	return out
}

// failures is how many calls of each store method fail.
type failures struct{ failLast, failClaim, failSeeds int }

// flakyStore fails the next failLast, failClaim and failSeeds calls.
type flakyStore struct {
	runStore
	mu sync.Mutex
	failures
}

var errMySQL = errors.New("mysql down")

func (f *flakyStore) fail(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (f *flakyStore) LastRuns(ctx context.Context, crawl string) (map[string]time.Time, error) {
	if f.fail(&f.failLast) {
		return nil, errMySQL
	}
	return f.runStore.LastRuns(ctx, crawl)
}

func (f *flakyStore) ClaimRun(ctx context.Context, crawl, name, spec string, due time.Time, master string) (bool, error) {
	if f.fail(&f.failClaim) {
		return false, errMySQL
	}
	return f.runStore.ClaimRun(ctx, crawl, name, spec, due, master)
}

func (f *flakyStore) SetRunSeeds(ctx context.Context, crawl, name string, due time.Time, seeds int) error {
	if f.fail(&f.failSeeds) {
		return errMySQL
	}
	return f.runStore.SetRunSeeds(ctx, crawl, name, due, seeds)
}

// openRuns returns a migrated store on a fresh database.
func openRuns(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sched parses spec into a Schedule.
func sched(t *testing.T, name, spec string) Schedule {
	t.Helper()
	s, err := rules.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return Schedule{Name: name, Spec: spec, Sched: s}
}

// fixed returns a schedules func giving list.
func fixed(list ...Schedule) func() []Schedule {
	return func() []Schedule { return list }
}

// newScheduler returns a scheduler of crawl on st.
func newScheduler(st runStore, crawl, master string, clk *fakeClock, seed reseeder, scheds func() []Schedule) *scheduler {
	log := slog.New(slog.DiscardHandler)
	return &scheduler{crawl: crawl, master: master, schedules: scheds, store: st, seed: seed, now: clk.Now,
		log: log, rl: ratelog.New(log, time.Minute)}
}

// run is a row of schedule_runs.
type run struct {
	Name   string
	Due    time.Time
	Master string
	Seeds  sql.NullInt64
}

// seeded is the Seeds of a finished run.
var seeded = sql.NullInt64{Int64: seedsPerRun, Valid: true}

// runs returns crawl's rows, by name and slot.
func runs(t *testing.T, st *store.Store, crawl string) []run {
	t.Helper()
	rows, err := st.DB.QueryContext(t.Context(),
		"SELECT name, due_at, master, seeds FROM schedule_runs WHERE crawl = ? ORDER BY name, due_at", crawl)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.Name, &r.Due, &r.Master, &r.Seeds); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScheduleFiresOnce(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	clk := &fakeClock{t: at(1, 10, 5)}
	list := fixed(sched(t, "", "@hourly"))
	seed1, seed2 := newSeeder(), newSeeder()
	m1 := newScheduler(st, "c", "m1", clk, seed1, list)

	m1.tick(ctx) // first sight: nothing due
	clk.Set(at(1, 11, 0))
	m1.tick(ctx)
	clk.Set(at(1, 11, 0).Add(30 * time.Second))
	m1.tick(ctx)
	if d := cmp.Diff(map[string]int{"": 1}, seed1.calls()); d != "" {
		t.Errorf("after the 11:00 slot (-want +got):\n%s", d)
	}

	// A restarted master, or a second one, does not fire 11:00 again.
	m2 := newScheduler(st, "c", "m2", clk, seed2, list)
	m2.tick(ctx)
	if d := cmp.Diff(map[string]int{}, seed2.calls()); d != "" {
		t.Errorf("second master after the 11:00 slot (-want +got):\n%s", d)
	}

	// Both masters wake for 12:00 at once: one fires.
	clk.Set(at(1, 12, 0))
	var wg sync.WaitGroup
	wg.Go(func() { m1.tick(ctx) })
	wg.Go(func() { m2.tick(ctx) })
	wg.Wait()
	if n := seed1.calls()[""] + seed2.calls()[""]; n != 2 {
		t.Errorf("%d re-seedings in all after the 12:00 slot, want 2", n)
	}

	got := runs(t, st, "c")
	for i := range got {
		got[i].Master = ""
	}
	want := []run{{Due: at(1, 11, 0), Seeds: seeded}, {Due: at(1, 12, 0), Seeds: seeded}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
}

func TestScheduleMissedSlotFiresOnce(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	cases := []struct {
		desc      string
		spec      string
		last, now time.Time
		want      time.Time // zero: nothing due
	}{
		{"hourly, down five hours", "@hourly", at(1, 10, 0), at(1, 15, 30), at(1, 15, 0)},
		{"started on the slot", "@hourly", at(1, 10, 0), at(1, 15, 0), at(1, 15, 0)},
		{"nothing missed", "@hourly", at(1, 10, 0), at(1, 10, 59), time.Time{}},
		{"every minute, down a month", "* * * * *", at(1, 10, 0), at(31, 10, 7).Add(30 * time.Second), at(31, 10, 7)},
		{"every second, down a month", "@every 1s", at(1, 10, 0), at(31, 10, 0).Add(500 * time.Millisecond), at(31, 10, 0)},
		{"every 7s, down a month", "@every 7s", at(1, 10, 0), at(31, 10, 0), at(1, 10, 0).Add(30 * 24 * time.Hour / (7 * time.Second) * 7 * time.Second)},
	}
	for i, c := range cases {
		crawl := string(rune('a' + i))
		if _, err := st.ClaimRun(ctx, crawl, "", c.spec, c.last, "old"); err != nil {
			t.Fatal(err)
		}
		seed := newSeeder()
		m := newScheduler(st, crawl, "m", &fakeClock{t: c.now}, seed, fixed(sched(t, "", c.spec)))
		m.tick(ctx)
		m.tick(ctx) // a second wake at the same time fires nothing more
		want := []run{{Due: c.last, Master: "old"}}
		wantCalls := map[string]int{}
		if !c.want.IsZero() {
			want = append(want, run{Due: c.want, Master: "m", Seeds: seeded})
			wantCalls[""] = 1
		}
		if d := cmp.Diff(wantCalls, seed.calls()); d != "" {
			t.Errorf("%s: re-seedings (-want +got):\n%s", c.desc, d)
		}
		if d := cmp.Diff(want, runs(t, st, crawl)); d != "" {
			t.Errorf("%s: runs (-want +got):\n%s", c.desc, d)
		}
	}
}

func TestScheduleNewDoesNotFireForPast(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	clk := &fakeClock{t: at(1, 10, 30)}
	list := fixed(sched(t, "", "@hourly"), sched(t, "site", "*/20 * * * *"))
	seed := newSeeder()
	newScheduler(st, "c", "m1", clk, seed, list).tick(ctx)
	if got := runs(t, st, "c"); len(got) != 0 {
		t.Errorf("a new schedule wrote runs: %v", got)
	}
	clk.Set(at(1, 10, 45))
	m := newScheduler(st, "c", "m2", clk, seed, list) // restarted: counts from 10:45
	m.tick(ctx)
	if d := cmp.Diff(map[string]int{}, seed.calls()); d != "" {
		t.Errorf("before the first slot after start (-want +got):\n%s", d)
	}
	clk.Set(at(1, 11, 0))
	m.tick(ctx)
	if d := cmp.Diff(map[string]int{"": 1, "site": 1}, seed.calls()); d != "" {
		t.Errorf("at the first slot (-want +got):\n%s", d)
	}
}

func TestScheduleViews(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	if _, err := st.ClaimRun(ctx, "c", "", "@hourly", at(1, 10, 0), "old"); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: at(1, 10, 30)}
	m := newScheduler(st, "c", "m", clk, newSeeder(), fixed(sched(t, "", "@hourly"), sched(t, "site", "@daily")))
	steps := []struct {
		now  time.Time
		want []ScheduleState
	}{
		{at(1, 10, 30), []ScheduleState{
			{Name: "", Spec: "@hourly", LastRun: at(1, 10, 0), NextRun: at(1, 11, 0)},
			{Name: "site", Spec: "@daily", NextRun: at(2, 0, 0)},
		}},
		{at(1, 11, 0), []ScheduleState{
			{Name: "", Spec: "@hourly", LastRun: at(1, 11, 0), NextRun: at(1, 12, 0)},
			{Name: "site", Spec: "@daily", NextRun: at(2, 0, 0)},
		}},
		{at(2, 0, 5), []ScheduleState{
			{Name: "", Spec: "@hourly", LastRun: at(2, 0, 0), NextRun: at(2, 1, 0)},
			{Name: "site", Spec: "@daily", LastRun: at(2, 0, 0), NextRun: at(3, 0, 0)},
		}},
	}
	for _, s := range steps {
		clk.Set(s.now)
		m.tick(ctx)
		if d := cmp.Diff(s.want, m.Views()); d != "" {
			t.Errorf("views at %s (-want +got):\n%s", s.now.Format(time.DateTime), d)
		}
	}
}

func TestScheduleChangesPickedUp(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	clk := &fakeClock{}
	seed := newSeeder()
	var mu sync.Mutex
	var list []Schedule
	set := func(l ...Schedule) {
		mu.Lock()
		defer mu.Unlock()
		list = l
	}
	m := newScheduler(st, "c", "m", clk, seed, func() []Schedule {
		mu.Lock()
		defer mu.Unlock()
		return list
	})
	hourly, site := sched(t, "", "@hourly"), sched(t, "site", "*/20 * * * *")
	steps := []struct {
		desc  string
		now   time.Time
		set   []Schedule // nil: unchanged
		calls map[string]int
	}{
		{"start", at(1, 10, 30), []Schedule{hourly}, map[string]int{}},
		{"rule set added on its slot: counts from now", at(1, 10, 40), []Schedule{hourly, site}, map[string]int{}},
		{"both fire", at(1, 11, 0), nil, map[string]int{"": 1, "site": 1}},
		{"spec changed: its 11:30 slot came before the change", at(1, 11, 40),
			[]Schedule{sched(t, "", "30 * * * *"), site}, map[string]int{"": 1, "site": 2}},
		{"rule set removed", at(1, 11, 45), []Schedule{sched(t, "", "30 * * * *")}, map[string]int{"": 1, "site": 2}},
		{"removed rule set's slot", at(1, 12, 0), nil, map[string]int{"": 1, "site": 2}},
		{"new spec's slot", at(1, 12, 30), nil, map[string]int{"": 2, "site": 2}},
	}
	for _, s := range steps {
		clk.Set(s.now)
		if s.set != nil {
			set(s.set...)
		}
		m.tick(ctx)
		if d := cmp.Diff(s.calls, seed.calls()); d != "" {
			t.Errorf("%s: re-seedings (-want +got):\n%s", s.desc, d)
		}
	}
	want := []ScheduleState{{Name: "", Spec: "30 * * * *", LastRun: at(1, 12, 30), NextRun: at(1, 13, 30)}}
	if d := cmp.Diff(want, m.Views()); d != "" {
		t.Errorf("views (-want +got):\n%s", d)
	}
}

func TestScheduleRetries(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	cases := []struct {
		desc   string
		store  failures
		fail   int           // failing Reseed calls
		ticks  int           // wakes until the run is done
		before []run         // runs after the first wake
		views  ScheduleState // after the first wake
	}{
		{"last runs unreadable at start", failures{failLast: 1}, 0, 2,
			[]run{{Due: at(1, 10, 0), Master: "old"}},
			// Last runs unknown yet: shown as a schedule counting from now.
			ScheduleState{Spec: "@hourly", NextRun: at(1, 13, 0)}},
		{"claim fails", failures{failClaim: 1}, 0, 2,
			[]run{{Due: at(1, 10, 0), Master: "old"}},
			ScheduleState{Spec: "@hourly", LastRun: at(1, 10, 0), NextRun: at(1, 12, 0)}},
		{"re-seeding fails twice", failures{}, 2, 3,
			[]run{{Due: at(1, 10, 0), Master: "old"}, {Due: at(1, 12, 0), Master: "m"}},
			ScheduleState{Spec: "@hourly", LastRun: at(1, 12, 0), NextRun: at(1, 13, 0)}},
		{"seed count not stored", failures{failSeeds: 1}, 0, 2,
			[]run{{Due: at(1, 10, 0), Master: "old"}, {Due: at(1, 12, 0), Master: "m"}},
			ScheduleState{Spec: "@hourly", LastRun: at(1, 12, 0), NextRun: at(1, 13, 0)}},
	}
	for i, c := range cases {
		crawl := string(rune('a' + i))
		if _, err := st.ClaimRun(ctx, crawl, "", "@hourly", at(1, 10, 0), "old"); err != nil {
			t.Fatal(err)
		}
		fs := &flakyStore{runStore: st, failures: c.store}
		seed := newSeeder()
		seed.fail = c.fail
		clk := &fakeClock{t: at(1, 12, 30)}
		m := newScheduler(fs, crawl, "m", clk, seed, fixed(sched(t, "", "@hourly")))
		if wait := m.tick(ctx); wait > scheduleRetry {
			t.Errorf("%s: sleeps %v after a failure, want at most %v", c.desc, wait, scheduleRetry)
		}
		if d := cmp.Diff(c.before, runs(t, st, crawl)); d != "" {
			t.Errorf("%s: runs after the failure (-want +got):\n%s", c.desc, d)
		}
		if d := cmp.Diff([]ScheduleState{c.views}, m.Views()); d != "" {
			t.Errorf("%s: views after the failure (-want +got):\n%s", c.desc, d)
		}
		// A second master meanwhile neither fires the claimed slot nor
		// takes over a slot whose claim failed twice.
		other := newSeeder()
		if c.store.failClaim == 0 && c.store.failLast == 0 {
			newScheduler(st, crawl, "m2", clk, other, fixed(sched(t, "", "@hourly"))).tick(ctx)
		}
		for range c.ticks - 1 {
			m.tick(ctx)
		}
		m.tick(ctx) // done: nothing more to do
		if d := cmp.Diff(map[string]int{"": 1}, seed.calls()); d != "" {
			t.Errorf("%s: re-seedings (-want +got):\n%s", c.desc, d)
		}
		if d := cmp.Diff(map[string]int{}, other.calls()); d != "" {
			t.Errorf("%s: second master's re-seedings (-want +got):\n%s", c.desc, d)
		}
		want := []run{{Due: at(1, 10, 0), Master: "old"}, {Due: at(1, 12, 0), Master: "m", Seeds: seeded}}
		if d := cmp.Diff(want, runs(t, st, crawl)); d != "" {
			t.Errorf("%s: runs (-want +got):\n%s", c.desc, d)
		}
	}
}

// TestScheduleSupersededRun: a claimed slot still failing to re-seed when
// the next slot comes is replaced by it, not fired twice.
func TestScheduleSupersededRun(t *testing.T) {
	ctx := t.Context()
	st := openRuns(t)
	if _, err := st.ClaimRun(ctx, "c", "", "@hourly", at(1, 10, 0), "old"); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: at(1, 11, 0)}
	seed := newSeeder()
	seed.fail = 1
	m := newScheduler(st, "c", "m", clk, seed, fixed(sched(t, "", "@hourly")))
	m.tick(ctx)
	clk.Set(at(1, 12, 0))
	m.tick(ctx)
	m.tick(ctx)
	if d := cmp.Diff(map[string]int{"": 1}, seed.calls()); d != "" {
		t.Errorf("re-seedings (-want +got):\n%s", d)
	}
	want := []run{
		{Due: at(1, 10, 0), Master: "old"},
		{Due: at(1, 11, 0), Master: "m"}, // never re-seeded
		{Due: at(1, 12, 0), Master: "m", Seeds: seeded},
	}
	if d := cmp.Diff(want, runs(t, st, "c")); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
}

func TestScheduleLatestDue(t *testing.T) {
	type due struct {
		At time.Time
		OK bool
	}
	cases := []struct {
		spec       string
		after, now time.Time
		want       due
	}{
		{"@hourly", at(1, 10, 0), at(1, 10, 59), due{}},
		{"@hourly", at(1, 10, 0), at(1, 11, 0), due{at(1, 11, 0), true}},
		{"@hourly", at(1, 10, 30), at(1, 13, 10), due{at(1, 13, 0), true}},
		{"@hourly", at(1, 13, 0), at(1, 10, 0), due{}}, // clock went back
		{"@daily", at(1, 0, 0), at(31, 12, 0), due{at(31, 0, 0), true}},
		{"* * * * *", at(1, 0, 0), at(31, 0, 0).Add(-time.Second), due{at(30, 23, 59), true}},
		{"*/5 * * * *", at(1, 0, 0), at(31, 0, 3), due{at(31, 0, 0), true}},
		{"@every 1s", at(1, 0, 0), at(31, 0, 0).Add(999 * time.Millisecond), due{at(31, 0, 0), true}},
		{"@every 1h", at(1, 0, 0).Add(1500 * time.Millisecond), at(1, 5, 0), due{at(1, 4, 0).Add(time.Second), true}},
		{"@every 1h", at(1, 0, 0), at(1, 0, 59), due{}},
	}
	for _, c := range cases {
		s := sched(t, "", c.spec)
		var got due
		got.At, got.OK = latestDue(s.Sched, c.after, c.now)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("latestDue(%q, %s, %s) (-want +got):\n%s", c.spec,
				c.after.Format(time.DateTime), c.now.Format(time.DateTime), d)
		}
	}
}

func TestSchedulerRun(t *testing.T) {
	st := openRuns(t)
	if _, err := st.ClaimRun(t.Context(), "c", "", "@hourly", at(1, 10, 0), "old"); err != nil {
		t.Fatal(err)
	}
	// The pool's idle connections outlive the test; the scheduler's
	// goroutine must not.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
		goleak.IgnoreAnyFunction("database/sql.(*DB).connectionCleaner"),
		goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))

	var logs bytes.Buffer
	seed := newSeeder()
	seed.called = make(chan string, 10)
	m := newScheduler(st, "c", "m", &fakeClock{t: at(1, 12, 30)}, seed, fixed(sched(t, "", "@hourly")))
	m.log = slog.New(slog.NewJSONHandler(&logs, nil))
	fired := 0
	m.onFire = func() { fired++ }

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	select {
	case name := <-seed.called: // the missed 12:00 slot, at start
		if name != "" {
			t.Errorf("re-seeded %q, want the crawl (\"\")", name)
		}
	case <-time.After(time.Minute):
		t.Error("the missed slot did not fire")
	}
	cancel()
	<-done

	if fired != 1 {
		t.Errorf("onFire called %d times, want 1", fired)
	}
	var line struct {
		Msg   string    `json:"msg"`
		Name  *string   `json:"name"`
		Due   time.Time `json:"due"`
		Seeds int       `json:"seeds"`
	}
	var found bool
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line.Msg == "scheduled recrawl" {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("no \"scheduled recrawl\" line in:\n%s", logs.String())
	}
	if line.Name == nil || *line.Name != "" || !line.Due.Equal(at(1, 12, 0)) || line.Seeds != seedsPerRun {
		t.Errorf("log line: name %v, due %s, seeds %d; want \"\", %s, %d", line.Name, line.Due, line.Seeds,
			at(1, 12, 0), seedsPerRun)
	}
}
