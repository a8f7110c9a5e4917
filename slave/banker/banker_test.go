package banker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitUntil polls cond until it holds, failing the test after a generous
// bound (a hang, not a speed requirement).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// tryAcquire reports whether w's request v is granted without waiting. If
// it waits, the wait is cancelled, and the state must be as before.
func tryAcquire(t *testing.T, g *Governor, w *Worker, v Vector) bool {
	t.Helper()
	before := g.Snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Acquire(ctx, v) }()
	var granted bool
	waitUntil(t, "acquire to be granted or to wait", func() bool {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("acquire %v: %v", v, err)
			}
			granted = true
			return true
		default:
			return g.Snapshot().Waiting > before.Waiting
		}
	})
	if granted {
		return true
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire %v: got %v, want context.Canceled", v, err)
	}
	if diff := cmp.Diff(before, g.Snapshot()); diff != "" {
		t.Fatalf("state after a cancelled acquire (-before +after):\n%s", diff)
	}
	return false
}

type namedWorker struct {
	name       string
	max, alloc Vector
}

type request struct {
	who         string
	req         Vector
	wantGranted bool
}

// TestTextbook replays the textbook examples: each case registers the
// workers, acquires their allocations, checks the available vector and the
// safe sequence, then applies the requests in order (a granted request
// stays granted; one that must wait is cancelled and leaves no trace).
func TestTextbook(t *testing.T) {
	tests := []struct {
		name      string
		totals    Vector
		workers   []namedWorker
		wantAvail Vector
		wantSeq   []string
		requests  []request
		// after the requests
		wantAvailAfter Vector
		wantSeqAfter   []string
	}{
		{
			// Silberschatz, Galvin and Gagne, Operating System Concepts,
			// the banker's algorithm example: five processes, resources A
			// (10), B (5), C (7).
			name:   "silberschatz",
			totals: Vector{"A": 10, "B": 5, "C": 7},
			workers: []namedWorker{
				{"P0", Vector{"A": 7, "B": 5, "C": 3}, Vector{"A": 0, "B": 1, "C": 0}},
				{"P1", Vector{"A": 3, "B": 2, "C": 2}, Vector{"A": 2, "B": 0, "C": 0}},
				{"P2", Vector{"A": 9, "B": 0, "C": 2}, Vector{"A": 3, "B": 0, "C": 2}},
				{"P3", Vector{"A": 2, "B": 2, "C": 2}, Vector{"A": 2, "B": 1, "C": 1}},
				{"P4", Vector{"A": 4, "B": 3, "C": 3}, Vector{"A": 0, "B": 0, "C": 2}},
			},
			wantAvail: Vector{"A": 3, "B": 3, "C": 2},
			wantSeq:   []string{"P1", "P3", "P4", "P0", "P2"},
			requests: []request{
				{"P1", Vector{"A": 1, "C": 2}, true},
				{"P4", Vector{"A": 3, "B": 3}, false}, // not available
				{"P0", Vector{"B": 2}, false},         // available, unsafe
			},
			wantAvailAfter: Vector{"A": 2, "B": 3, "C": 0},
			wantSeqAfter:   []string{"P1", "P3", "P4", "P0", "P2"},
		},
		{
			// Dijkstra's single-currency banker, in the form given by
			// Tanenbaum, Modern Operating Systems (the banker's algorithm
			// for a single resource): ten units, four customers.
			name:   "dijkstra single resource",
			totals: Vector{"units": 10},
			workers: []namedWorker{
				{"A", Vector{"units": 6}, Vector{"units": 1}},
				{"B", Vector{"units": 5}, Vector{"units": 1}},
				{"C", Vector{"units": 4}, Vector{"units": 2}},
				{"D", Vector{"units": 7}, Vector{"units": 4}},
			},
			wantAvail: Vector{"units": 2},
			wantSeq:   []string{"C", "D", "A", "B"},
			requests: []request{
				{"B", Vector{"units": 1}, false}, // leaves 1: nobody can finish
				{"D", Vector{"units": 1}, false},
				{"C", Vector{"units": 2}, true}, // C can finish
				{"A", Vector{"units": 1}, false},
			},
			wantAvailAfter: Vector{"units": 0},
			wantSeqAfter:   []string{"C", "D", "A", "B"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.totals, Options{})
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*Worker{}
			names := map[uint64]string{}
			for _, nw := range tt.workers {
				w, err := g.Register(nw.max)
				if err != nil {
					t.Fatal(err)
				}
				byName[nw.name], names[w.ID()] = w, nw.name
			}
			for _, nw := range tt.workers {
				if !tryAcquire(t, g, byName[nw.name], nw.alloc) {
					t.Fatalf("initial allocation of %s %v not granted", nw.name, nw.alloc)
				}
			}
			check := func(when string, wantAvail Vector, wantSeq []string) {
				t.Helper()
				s := g.Snapshot()
				if diff := cmp.Diff(wantAvail, s.Available); diff != "" {
					t.Errorf("%s: available (-want +got):\n%s", when, diff)
				}
				ids, ok := s.SafeSequence()
				var seq []string
				for _, id := range ids {
					seq = append(seq, names[id])
				}
				if !ok || !g.Safe() {
					t.Errorf("%s: unsafe state (textbook %v, governor %v)", when, ok, g.Safe())
				}
				if diff := cmp.Diff(wantSeq, seq); diff != "" {
					t.Errorf("%s: safe sequence (-want +got):\n%s", when, diff)
				}
			}
			check("initially", tt.wantAvail, tt.wantSeq)
			var got []request
			for _, r := range tt.requests {
				got = append(got, request{r.who, r.req, tryAcquire(t, g, byName[r.who], r.req)})
			}
			if diff := cmp.Diff(tt.requests, got, cmp.AllowUnexported(request{})); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			check("after the requests", tt.wantAvailAfter, tt.wantSeqAfter)
		})
	}
}

// TestDijkstraWake continues the single-resource example: B's unsafe
// request waits, and is granted when C, having finished, unregisters.
func TestDijkstraWake(t *testing.T) {
	g, err := New(Vector{"units": 10}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := map[string]*Worker{}
	for _, c := range []struct {
		name     string
		max, has int64
	}{{"A", 6, 1}, {"B", 5, 1}, {"C", 4, 2}, {"D", 7, 4}} {
		w, err := g.Register(Vector{"units": c.max})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Acquire(context.Background(), Vector{"units": c.has}); err != nil {
			t.Fatal(err)
		}
		ws[c.name] = w
	}
	done := make(chan error, 1)
	go func() { done <- ws["B"].Acquire(context.Background(), Vector{"units": 1}) }()
	waitUntil(t, "B to wait", func() bool { return g.Snapshot().Waiting == 1 })
	if err := ws["C"].Acquire(context.Background(), Vector{"units": 2}); err != nil {
		t.Fatal(err)
	}
	if err := ws["C"].Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B's acquire: %v", err)
	}
	s := g.Snapshot()
	if diff := cmp.Diff(Vector{"units": 3}, s.Available); diff != "" {
		t.Errorf("available (-want +got):\n%s", diff)
	}
	if !s.Safe() || s.Waiting != 0 {
		t.Errorf("safe %v, waiting %d; want safe, none waiting", s.Safe(), s.Waiting)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(g *Governor) error
		want error
	}{
		{"new without kinds", func(*Governor) error { _, err := New(nil, Options{}); return err }, nil},
		{"new negative total", func(*Governor) error { _, err := New(Vector{"conns": -1}, Options{}); return err }, ErrNegative},
		{"register over total", func(g *Governor) error { _, err := g.Register(Vector{"conns": 5}); return err }, ErrExceedsTotal},
		{"register unknown kind", func(g *Governor) error { _, err := g.Register(Vector{"gpus": 1}); return err }, ErrUnknownKind},
		{"register negative", func(g *Governor) error { _, err := g.Register(Vector{"tabs": -1}); return err }, ErrNegative},
		{"acquire over claim", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			if err := w.Acquire(ctx, Vector{"conns": 1}); err != nil {
				return err
			}
			return w.Acquire(ctx, Vector{"conns": 2})
		}, ErrExceedsClaim},
		{"acquire kind outside claim", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			return w.Acquire(ctx, Vector{"tabs": 1})
		}, ErrExceedsClaim},
		{"acquire unknown kind", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			return w.Acquire(ctx, Vector{"gpus": 1})
		}, ErrUnknownKind},
		{"acquire cancelled context", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			c, cancel := context.WithCancel(ctx)
			cancel()
			return w.Acquire(c, Vector{"conns": 1})
		}, context.Canceled},
		{"release over held", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			if err := w.Acquire(ctx, Vector{"conns": 1}); err != nil {
				return err
			}
			return w.Release(Vector{"conns": 2})
		}, ErrOverRelease},
		{"acquire after unregister", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			if err := w.Unregister(); err != nil {
				return err
			}
			return w.Acquire(ctx, Vector{"conns": 1})
		}, ErrUnregistered},
		{"release after unregister", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			if err := w.Unregister(); err != nil {
				return err
			}
			return w.Release(Vector{})
		}, ErrUnregistered},
		{"unregister twice", func(g *Governor) error {
			w, _ := g.Register(Vector{"conns": 2})
			if err := w.Unregister(); err != nil {
				return err
			}
			return w.Unregister()
		}, ErrUnregistered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(Vector{"conns": 4, "tabs": 2, "membytes": 1 << 30}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			before := g.Snapshot()
			err = tt.run(g)
			if err == nil {
				t.Fatalf("got no error, want %v", tt.want)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			// A failed call changes nothing but what the setup did; the
			// release of everything restores the totals.
			if diff := cmp.Diff(before.Totals, g.Snapshot().Totals); diff != "" {
				t.Errorf("totals changed (-before +after):\n%s", diff)
			}
		})
	}
}

// account and allocator let the deadlock scenario run against a naive
// greedy allocator and against the Governor.
type account interface {
	acquire(ctx context.Context, v Vector) error
	releaseAll()
}

type allocator interface {
	join(max Vector) (account, error)
	waiting() int
}

// greedy grants any request that is available, without looking ahead.
type greedy struct {
	mu      sync.Mutex
	avail   Vector
	changed chan struct{} // closed and replaced on every release
	nwait   int           // goroutines waiting on changed
}

type greedyAccount struct {
	g    *greedy
	held Vector
}

func newGreedy(totals Vector) *greedy {
	av := Vector{}
	for k, v := range totals {
		av[k] = v
	}
	return &greedy{avail: av, changed: make(chan struct{})}
}

func (g *greedy) join(Vector) (account, error) { return &greedyAccount{g: g, held: Vector{}}, nil }

func (g *greedy) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nwait
}

func (a *greedyAccount) acquire(ctx context.Context, v Vector) error {
	g := a.g
	for {
		g.mu.Lock()
		fits := true
		for k, n := range v {
			fits = fits && n <= g.avail[k]
		}
		if fits {
			for k, n := range v {
				g.avail[k] -= n
				a.held[k] += n
			}
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.nwait++
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			if ch == g.changed {
				g.nwait--
			}
			g.mu.Unlock()
			return ctx.Err()
		}
	}
}

func (a *greedyAccount) releaseAll() {
	g := a.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, n := range a.held {
		g.avail[k] += n
	}
	a.held = Vector{}
	close(g.changed)
	g.changed = make(chan struct{})
	g.nwait = 0
}

type governorAlloc struct{ g *Governor }

type governorAccount struct{ w *Worker }

func (a governorAlloc) join(max Vector) (account, error) {
	w, err := a.g.Register(max)
	return governorAccount{w}, err
}

func (a governorAlloc) waiting() int { return a.g.Snapshot().Waiting }

func (a governorAccount) acquire(ctx context.Context, v Vector) error { return a.w.Acquire(ctx, v) }

func (a governorAccount) releaseAll() {
	if err := a.w.Unregister(); err != nil {
		panic(err)
	}
}

// runScenario runs two fetch workers (2 conns, taken one at a time) and two
// render workers (1 tab, then 1 conn, then 1 conn) over 4 conns and 2 tabs.
// The first steps are started one worker at a time, each until it is
// granted or waits; then every worker takes its last conn and releases all.
// It reports whether the workers deadlocked: every live worker waiting.
func runScenario(t *testing.T, alloc allocator) (deadlocked bool) {
	type script struct {
		max            Vector
		phase1, phase2 []Vector
	}
	fetch := script{Vector{"conns": 2}, []Vector{{"conns": 1}}, []Vector{{"conns": 1}}}
	render := script{Vector{"tabs": 1, "conns": 2}, []Vector{{"tabs": 1}, {"conns": 1}}, []Vector{{"conns": 1}}}
	scripts := []script{fetch, fetch, render, render}

	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which ends the waits of a deadlock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var finished atomic.Int64
	phase2 := make(chan struct{})
	starts := make([]chan struct{}, len(scripts))
	phase1Done := make([]chan struct{}, len(scripts))
	for i, sc := range scripts {
		acc, err := alloc.join(sc.max)
		if err != nil {
			t.Fatal(err)
		}
		starts[i], phase1Done[i] = make(chan struct{}), make(chan struct{})
		wg.Go(func() {
			<-starts[i]
			for _, v := range sc.phase1 {
				if acc.acquire(ctx, v) != nil {
					return
				}
			}
			close(phase1Done[i])
			<-phase2
			for _, v := range sc.phase2 {
				if acc.acquire(ctx, v) != nil {
					return
				}
			}
			acc.releaseAll()
			finished.Add(1)
		})
	}
	for i := range scripts {
		before := alloc.waiting()
		close(starts[i])
		waitUntil(t, fmt.Sprintf("worker %d's first steps", i), func() bool {
			select {
			case <-phase1Done[i]:
				return true
			default:
				return alloc.waiting() > before
			}
		})
	}
	close(phase2)
	n := int64(len(scripts))
	waitUntil(t, "the workers to finish or deadlock", func() bool {
		live := n - finished.Load()
		if live == 0 {
			return true
		}
		deadlocked = int64(alloc.waiting()) == live
		return deadlocked
	})
	return deadlocked
}

func TestGreedyDeadlocksGovernorDoesNot(t *testing.T) {
	totals := Vector{"conns": 4, "tabs": 2}
	tests := []struct {
		name         string
		alloc        func(t *testing.T) allocator
		wantDeadlock bool
	}{
		{"greedy", func(*testing.T) allocator { return newGreedy(totals) }, true},
		{"governor", func(t *testing.T) allocator {
			g, err := New(totals, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return governorAlloc{g}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc := tt.alloc(t)
			if got := runScenario(t, alloc); got != tt.wantDeadlock {
				t.Fatalf("deadlocked = %v, want %v", got, tt.wantDeadlock)
			}
			if ga, ok := alloc.(governorAlloc); ok {
				s := ga.g.Snapshot()
				if diff := cmp.Diff(totals, s.Available); diff != "" {
					t.Errorf("available after all finished (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// checkInvariants reports what is wrong with a snapshot: an unsafe state
// (by the textbook search), a negative amount, an allocation above a
// claim, or available plus allocations different from the totals.
func checkInvariants(s Snapshot) error {
	if !s.Safe() {
		return errors.New("unsafe state")
	}
	for k, total := range s.Totals {
		sum := s.Available[k]
		if s.Available[k] < 0 {
			return fmt.Errorf("available %s = %d", k, s.Available[k])
		}
		for _, w := range s.Workers {
			if a := w.Allocated[k]; a < 0 || a > w.Max[k] {
				return fmt.Errorf("worker %d: %s allocated %d of max %d", w.ID, k, a, w.Max[k])
			}
			sum += w.Allocated[k]
		}
		if sum != total {
			return fmt.Errorf("%s: available + allocated = %d, total %d", k, sum, total)
		}
	}
	return nil
}

func TestConcurrentLoadStaysSafe(t *testing.T) {
	const (
		workers   = 32
		sequences = 500
	)
	totals := Vector{"conns": 16, "tabs": 4, "membytes": 64 << 20}
	var grants, violations atomic.Int64
	var firstViolation atomic.Value
	g, err := New(totals, Options{OnGrant: func(s Snapshot) {
		grants.Add(1)
		if err := checkInvariants(s); err != nil {
			if violations.Add(1) == 1 {
				firstViolation.Store(fmt.Sprintf("%v in %+v", err, s))
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var timeouts atomic.Int64
	errs := make(chan error, workers)
	for i := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			randClaim := func() Vector {
				return Vector{
					"conns":    1 + rng.Int64N(8),
					"tabs":     rng.Int64N(3),
					"membytes": 1 + rng.Int64N(32<<20),
				}
			}
			w, err := g.Register(randClaim())
			if err != nil {
				errs <- err
				return
			}
			snap := g.Snapshot()
			var max Vector
			for _, ws := range snap.Workers {
				if ws.ID == w.ID() {
					max = ws.Max
				}
			}
			for seq := range sequences {
				if seq%100 == 99 {
					if err := w.Unregister(); err != nil {
						errs <- err
						return
					}
					max = randClaim()
					if w, err = g.Register(max); err != nil {
						errs <- err
						return
					}
				}
				held := Vector{}
				for range 1 + rng.IntN(3) {
					req := Vector{}
					for k, m := range max {
						if rem := m - held[k]; rem > 0 && rng.IntN(2) == 0 {
							req[k] = 1 + rng.Int64N(rem)
						}
					}
					actx, cancel := ctx, context.CancelFunc(func() {})
					if rng.IntN(10) == 0 {
						actx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
					}
					err := w.Acquire(actx, req)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						timeouts.Add(1)
						break
					}
					if err != nil {
						errs <- err
						return
					}
					for k, n := range req {
						held[k] += n
					}
					if rng.IntN(3) == 0 { // give part back early
						part := Vector{}
						for k, n := range held {
							part[k] = rng.Int64N(n + 1)
							held[k] -= part[k]
						}
						if err := w.Release(part); err != nil {
							errs <- err
							return
						}
					}
				}
				if err := w.Release(held); err != nil {
					errs <- err
					return
				}
			}
			if err := w.Unregister(); err != nil {
				errs <- err
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("workers did not finish (deadlock?); state %+v", g.Snapshot())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := violations.Load(); n > 0 {
		t.Errorf("%d grants broke an invariant; first: %v", n, firstViolation.Load())
	}
	s := g.Snapshot()
	want := Snapshot{Totals: totals, Available: totals, Workers: []WorkerState{}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	t.Logf("%d grants checked, %d acquires timed out", grants.Load(), timeouts.Load())
}

// TestCancelLeavesStateUnchanged cancels waiting requests, one waiting for
// availability and one waiting because it is unsafe (tryAcquire checks
// that the state is as before), then releases everything the others hold:
// the cancelled request must not be granted.
func TestCancelLeavesStateUnchanged(t *testing.T) {
	type claim struct{ max, hold int64 }
	tests := []struct {
		name   string
		others []claim // registered and granted before the waiter
		wmax   int64   // the waiter's claim; it asks for 1 conn
	}{
		// 4 of 4 held.
		{"not available", []claim{{4, 4}}, 1},
		// 3 of 4 held; one more to the waiter leaves 0 available while
		// every worker still needs at least 1.
		{"unsafe", []claim{{4, 2}, {2, 1}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(Vector{"conns": 4, "tabs": 2}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var others []*Worker
			for _, c := range tt.others {
				o, err := g.Register(Vector{"conns": c.max})
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Acquire(context.Background(), Vector{"conns": c.hold}); err != nil {
					t.Fatal(err)
				}
				others = append(others, o)
			}
			w, err := g.Register(Vector{"conns": tt.wmax})
			if err != nil {
				t.Fatal(err)
			}
			if tryAcquire(t, g, w, Vector{"conns": 1}) {
				t.Fatal("acquire granted, want it to wait")
			}
			for _, o := range others {
				if err := o.Unregister(); err != nil {
					t.Fatal(err)
				}
			}
			want := Snapshot{
				Totals:    Vector{"conns": 4, "tabs": 2},
				Available: Vector{"conns": 4, "tabs": 2},
				Workers: []WorkerState{{
					ID: w.ID(), Max: Vector{"conns": tt.wmax, "tabs": 0}, Allocated: Vector{"conns": 0, "tabs": 0},
				}},
			}
			if diff := cmp.Diff(want, g.Snapshot()); diff != "" {
				t.Errorf("state after the others left (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReleaseWakesWaitersFIFO has two waiters, the older asking 3 conns and
// the newer 2; what a release frees goes to the oldest waiter that it
// suffices for, without blocking younger waiters behind older ones.
func TestReleaseWakesWaitersFIFO(t *testing.T) {
	tests := []struct {
		name        string
		release     Vector
		unregister  bool
		wantGranted []string
	}{
		{"release 3: the older gets it", Vector{"conns": 3}, false, []string{"older"}},
		{"release 2: the younger is not blocked", Vector{"conns": 2}, false, []string{"younger"}},
		{"release 1: nobody", Vector{"conns": 1}, false, nil},
		{"unregister: the older first, then too little", nil, true, []string{"older"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(Vector{"conns": 4}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			holder, _ := g.Register(Vector{"conns": 4})
			if err := holder.Acquire(context.Background(), Vector{"conns": 4}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type waiting struct {
				name string
				w    *Worker
				done chan error
			}
			var ws []waiting
			for i, c := range []struct {
				name string
				n    int64
			}{{"older", 3}, {"younger", 2}} {
				w, err := g.Register(Vector{"conns": c.n})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- w.Acquire(ctx, Vector{"conns": c.n}) }()
				waitUntil(t, c.name+" to wait", func() bool { return g.Snapshot().Waiting == i+1 })
				ws = append(ws, waiting{c.name, w, done})
			}
			if tt.unregister {
				err = holder.Unregister()
			} else {
				err = holder.Release(tt.release)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Grants happen before Release returns.
			alloc := map[uint64]int64{}
			for _, s := range g.Snapshot().Workers {
				alloc[s.ID] = s.Allocated["conns"]
			}
			var got []string
			for _, x := range ws {
				if alloc[x.w.ID()] > 0 {
					got = append(got, x.name)
					if err := <-x.done; err != nil {
						t.Errorf("%s: %v", x.name, err)
					}
				}
			}
			if diff := cmp.Diff(tt.wantGranted, got); diff != "" {
				t.Errorf("granted (-want +got):\n%s", diff)
			}
			cancel()
			for _, x := range ws {
				if !containsName(got, x.name) {
					if err := <-x.done; !errors.Is(err, context.Canceled) {
						t.Errorf("%s: got %v after cancel, want context.Canceled", x.name, err)
					}
				}
			}
			if !g.Safe() {
				t.Error("unsafe state")
			}
		})
	}
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// TestUnregisterFailsOwnWaiter unregisters a worker whose Acquire waits.
func TestUnregisterFailsOwnWaiter(t *testing.T) {
	g, err := New(Vector{"conns": 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := g.Register(Vector{"conns": 2})
	if err := holder.Acquire(context.Background(), Vector{"conns": 2}); err != nil {
		t.Fatal(err)
	}
	w, _ := g.Register(Vector{"conns": 1})
	done := make(chan error, 1)
	go func() { done <- w.Acquire(context.Background(), Vector{"conns": 1}) }()
	waitUntil(t, "acquire to wait", func() bool { return g.Snapshot().Waiting == 1 })
	if err := w.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrUnregistered) {
		t.Fatalf("got %v, want ErrUnregistered", err)
	}
	want := Snapshot{
		Totals:    Vector{"conns": 2},
		Available: Vector{"conns": 0},
		Workers:   []WorkerState{{ID: holder.ID(), Max: Vector{"conns": 2}, Allocated: Vector{"conns": 2}}},
	}
	if diff := cmp.Diff(want, g.Snapshot()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// TestSearchMatchesTextbook compares the sorted search with the textbook
// one on random states, safe and unsafe (built by bypassing the checks),
// and the early-exit grant check with a full textbook check of the state
// after the grant.
func TestSearchMatchesTextbook(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"a", "b", "c"}
	var safeN, unsafeN, grantN, refuseN int
	for iter := range 3000 {
		totals := Vector{}
		for _, k := range kinds[:1+rng.IntN(len(kinds))] {
			totals[k] = 1 + rng.Int64N(8)
		}
		g, err := New(totals, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + rng.IntN(8) {
			mx := Vector{}
			for k, tot := range totals {
				mx[k] = rng.Int64N(tot + 1)
			}
			w, err := g.Register(mx)
			if err != nil {
				t.Fatal(err)
			}
			r := make([]int64, len(g.kinds))
			for j := range r {
				r[j] = min(rng.Int64N(w.max[j]+1), g.avail[j])
			}
			g.apply(w, r, 1) // no safety check: may be unsafe
		}
		s := g.Snapshot()
		want := s.Safe()
		if got := g.Safe(); got != want {
			t.Fatalf("iteration %d: Safe() = %v, textbook %v on %+v", iter, got, want, s)
		}
		if !want {
			unsafeN++
			continue
		}
		safeN++
		w := g.workers[rng.IntN(len(g.workers))]
		r := make([]int64, len(g.kinds))
		for j := range r {
			r[j] = rng.Int64N(min(w.need[j], g.avail[j]) + 1)
		}
		g.apply(w, r, 1)
		wantGrant := g.snapshot().Safe()
		g.apply(w, r, -1)
		g.mu.Lock()
		got := g.tryGrant(w, r)
		g.mu.Unlock()
		if got != wantGrant {
			t.Fatalf("iteration %d: grant of %v to %d = %v, textbook %v on %+v", iter, r, w.id, got, wantGrant, s)
		}
		if got {
			grantN++
		} else {
			refuseN++
			if diff := cmp.Diff(s, g.Snapshot()); diff != "" {
				t.Fatalf("iteration %d: refused grant not rolled back (-before +after):\n%s", iter, diff)
			}
		}
	}
	if safeN == 0 || unsafeN == 0 || grantN == 0 || refuseN == 0 {
		t.Errorf("poor coverage: %d safe, %d unsafe states, %d grants, %d refusals", safeN, unsafeN, grantN, refuseN)
	}
}
