// Package banker is a resource governor for the crawler's slaves: fetch
// workers and headless-Chrome render workers draw connection slots
// ("conns"), browser tabs ("tabs") and a memory budget for bodies
// ("membytes") from one Governor, which grants a request only when the
// state after the grant is safe, so that the workers can never deadlock on
// these resources. It follows patent CN104462195A (resource allocation
// against crawler deadlock: crawler processes are granted resources only
// when a safe sequence exists, found by the Work/Finish safety search; a
// request that is not safe waits and its tentative grant is rolled back;
// releases wake the waiters), which applies Dijkstra's banker's algorithm
// (EWD 108; EWD 623, "The mathematics behind the Banker's
// Algorithm").
//
// # Model
//
// A Governor is made with the totals of each resource kind (New). A worker
// registers with its maximum claim (Register), which may not exceed the
// totals. The worker then acquires and releases parts of its claim
// (Worker.Acquire, Worker.Release) and finally unregisters, which releases
// what it still holds (Worker.Unregister). Vectors are maps from kind to an
// amount (int64: "membytes" counts bytes); a kind missing from a Vector is
// zero, a kind unknown to the Governor is an error.
//
// A request is granted when it does not exceed the worker's remaining need
// (its maximum claim minus its allocation: a larger request is a bug in the
// caller and fails at once with ErrExceedsClaim), does not exceed what is
// available, and the state after a tentative grant is safe: there is an
// order in which every registered worker, given its remaining need, can
// finish and return its allocation. Otherwise the grant is rolled back and
// the caller waits, on a channel of its own (no spinning), until a release
// or an unregistration makes the request grantable, or until its context
// ends; a request whose context ends holds nothing.
//
// # The safety check
//
// The textbook search (Silberschatz, Galvin and Gagne, Operating System
// Concepts, "Banker's Algorithm") repeatedly scans the workers for one whose need fits in Work, adds its
// allocation to Work and marks it finished: O(workers² × kinds). Here the
// Governor keeps, for every kind, the workers sorted by their need of that
// kind (a grant or release moves one worker by insertion, usually a few
// places). The search keeps one pointer per kind into these orders and, per
// worker, the number of kinds whose need already fits in Work; as Work only
// grows, every pointer only advances, and a worker whose count reaches the
// number of kinds is ready to finish. The whole search is O(workers ×
// kinds).
//
// Two more facts shorten it. The state is always safe between operations
// (grants are checked, and releases, registrations and unregistrations
// keep a safe state safe), and from a safe state a grant to worker P is
// safe as soon as P can finish in the search: the Work at that point is
// what it was at the same point before the grant, and the rest of the
// original safe sequence still completes from there. So the search stops
// when the requester finishes, and when the requester's remaining need fits
// in what is left available it is safe without any search (the common
// case: O(kinds)).
//
// # Fairness and starvation
//
// Waiters are kept in FIFO order. After every release and unregistration
// they are re-checked in that order within one pass, each granted if it is
// now grantable, before the releasing call returns; so the resources a
// release frees go to the waiters, oldest first, before any later Acquire
// can take them. A grant never makes another waiter grantable (a state
// reached by a grant is safe only if the state before it was), so one pass
// per release suffices. A new Acquire is granted at once when grantable,
// without queueing behind waiters that are not.
//
// The governor is deadlock-free: in a safe state the first worker of a
// safe sequence can have any request within its need granted, so not every
// registered worker can be blocked in Acquire at once; as long as a worker
// that is not blocked eventually releases or unregisters (the banker's
// assumption: a worker granted its whole claim returns it in finite time),
// the system makes progress. It is not starvation-free: a waiter is skipped
// while its request is not grantable, so a large request can wait
// indefinitely while a stream of smaller requests from other workers keeps
// taking what releases free. (Blocking every later request behind the
// oldest waiter would prevent that, but could deadlock: the oldest waiter
// may need resources that only a worker queued behind it can free.)
// Callers that cannot wait forever pass a context with a deadline.
package banker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Vector maps resource kinds to amounts. A missing kind is zero.
type Vector map[string]int64

var (
	// ErrUnknownKind reports a Vector naming a kind the Governor was not
	// made with.
	ErrUnknownKind = errors.New("unknown resource kind")
	// ErrNegative reports a negative amount.
	ErrNegative = errors.New("negative amount")
	// ErrExceedsTotal reports a maximum claim larger than the totals.
	ErrExceedsTotal = errors.New("maximum claim exceeds totals")
	// ErrExceedsClaim reports a request larger than the worker's remaining
	// need (maximum claim minus allocation).
	ErrExceedsClaim = errors.New("request exceeds remaining claim")
	// ErrOverRelease reports a release of more than the worker holds.
	ErrOverRelease = errors.New("release exceeds allocation")
	// ErrUnregistered reports the use of a worker after Unregister, or an
	// Acquire that was waiting when its worker was unregistered.
	ErrUnregistered = errors.New("worker unregistered")
)

// Options tune a Governor. The zero value is ready to use.
type Options struct {
	// OnGrant, if set, is called after every grant with a Snapshot of the
	// state after it, with the Governor's lock held: it must not call the
	// Governor or its workers. It is meant for tests and metrics.
	OnGrant func(Snapshot)
}

// Snapshot is a copy of a Governor's state.
type Snapshot struct {
	Totals    Vector
	Available Vector
	// Workers are the registered workers, by increasing ID.
	Workers []WorkerState
	// Waiting counts the Acquire calls waiting for a grant.
	Waiting int
}

// WorkerState is one worker's part of a Snapshot.
type WorkerState struct {
	ID        uint64
	Max       Vector
	Allocated Vector
}

// Governor grants resources to workers by the banker's algorithm. It is
// safe for concurrent use.
type Governor struct {
	kinds []string       // sorted
	index map[string]int // kind -> position in kinds
	opts  Options

	mu      sync.Mutex
	total   []int64
	avail   []int64
	workers []*Worker   // registered workers, in no order
	order   [][]*Worker // per kind, workers by increasing need of it
	waiters []*waiter   // FIFO
	nextID  uint64

	// Scratch space of the safety search, under mu.
	work  []int64
	ptr   []int
	ready []*Worker
}

// Worker is one registered worker. Its methods are safe for concurrent
// use, though a worker is normally driven by one goroutine.
type Worker struct {
	g  *Governor
	id uint64

	// Under g.mu.
	idx   int // position in g.workers; -1 once unregistered
	max   []int64
	alloc []int64
	need  []int64 // max - alloc
	pos   []int   // per kind, position in g.order
	cnt   int     // safety search: kinds whose need fits in work
}

type waiter struct {
	w     *Worker
	req   []int64
	ready chan struct{} // closed once granted or failed
	err   error         // set before ready is closed
}

// New returns a Governor with the given totals; it needs at least one kind.
func New(totals Vector, opts Options) (*Governor, error) {
	if len(totals) == 0 {
		return nil, errors.New("banker: new: no resource kinds")
	}
	g := &Governor{opts: opts, index: make(map[string]int, len(totals))}
	for k, v := range totals {
		if v < 0 {
			return nil, fmt.Errorf("banker: new: kind %q: %w", k, ErrNegative)
		}
		g.kinds = append(g.kinds, k)
	}
	slices.Sort(g.kinds)
	n := len(g.kinds)
	g.total = make([]int64, n)
	g.avail = make([]int64, n)
	g.order = make([][]*Worker, n)
	g.work = make([]int64, n)
	g.ptr = make([]int, n)
	for i, k := range g.kinds {
		g.index[k] = i
		g.total[i] = totals[k]
		g.avail[i] = totals[k]
	}
	return g, nil
}

// Kinds returns the resource kinds, sorted.
func (g *Governor) Kinds() []string { return slices.Clone(g.kinds) }

// vec converts v into dst (len(dst) == len(g.kinds)).
func (g *Governor) vec(dst []int64, v Vector) error {
	clear(dst)
	for k, a := range v {
		i, ok := g.index[k]
		if !ok {
			return fmt.Errorf("kind %q: %w", k, ErrUnknownKind)
		}
		if a < 0 {
			return fmt.Errorf("kind %q: %w", k, ErrNegative)
		}
		dst[i] = a
	}
	return nil
}

func (g *Governor) toVector(v []int64) Vector {
	m := make(Vector, len(v))
	for i, a := range v {
		m[g.kinds[i]] = a
	}
	return m
}

// Register adds a worker with the given maximum claim, which may not
// exceed the totals.
func (g *Governor) Register(maxClaim Vector) (*Worker, error) {
	n := len(g.kinds)
	mx := make([]int64, n)
	if err := g.vec(mx, maxClaim); err != nil {
		return nil, fmt.Errorf("banker: register: %w", err)
	}
	for i, a := range mx {
		if a > g.total[i] {
			return nil, fmt.Errorf("banker: register: kind %q: claim %d, total %d: %w",
				g.kinds[i], a, g.total[i], ErrExceedsTotal)
		}
	}
	w := &Worker{g: g, max: mx, alloc: make([]int64, n), need: slices.Clone(mx), pos: make([]int, n)}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	w.id = g.nextID
	w.idx = len(g.workers)
	g.workers = append(g.workers, w)
	for j := range g.order {
		w.pos[j] = len(g.order[j])
		g.order[j] = append(g.order[j], w)
		g.fix(j, w)
	}
	return w, nil
}

// ID returns the worker's identifier, unique within its Governor and
// increasing in registration order.
func (w *Worker) ID() uint64 { return w.id }

// Acquire waits until req is granted to the worker or ctx ends. A request
// larger than the worker's remaining need fails at once with
// ErrExceedsClaim. If ctx ends first, Acquire returns ctx's error and the
// worker holds nothing of req.
func (w *Worker) Acquire(ctx context.Context, req Vector) error {
	g := w.g
	var buf [8]int64
	r := buf[:0]
	if n := len(g.kinds); n <= len(buf) {
		r = buf[:n]
	} else {
		r = make([]int64, n)
	}
	if err := g.vec(r, req); err != nil {
		return fmt.Errorf("banker: acquire: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("banker: acquire: %w", err)
	}
	zero := !slices.ContainsFunc(r, func(a int64) bool { return a != 0 })
	g.mu.Lock()
	if w.idx < 0 {
		g.mu.Unlock()
		return fmt.Errorf("banker: acquire: %w", ErrUnregistered)
	}
	for i, a := range r {
		if a > w.need[i] {
			g.mu.Unlock()
			return fmt.Errorf("banker: acquire: kind %q: request %d, remaining claim %d: %w",
				g.kinds[i], a, w.need[i], ErrExceedsClaim)
		}
	}
	if zero || g.tryGrant(w, r) {
		g.mu.Unlock()
		return nil
	}
	wt := &waiter{w: w, req: slices.Clone(r), ready: make(chan struct{})}
	g.waiters = append(g.waiters, wt)
	g.mu.Unlock()

	select {
	case <-wt.ready:
		if wt.err != nil {
			return fmt.Errorf("banker: acquire: %w", wt.err)
		}
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-wt.ready:
		// Granted (or failed) while ctx ended: give a grant back.
		if wt.err == nil {
			g.release(w, wt.req)
			g.wake()
		}
	default:
		g.waiters = slices.DeleteFunc(g.waiters, func(x *waiter) bool { return x == wt })
	}
	g.mu.Unlock()
	return fmt.Errorf("banker: acquire: %w", ctx.Err())
}

// Release returns v, which must not exceed what the worker holds, and
// grants what it can to the waiters.
func (w *Worker) Release(v Vector) error {
	g := w.g
	var buf [8]int64
	r := buf[:0]
	if n := len(g.kinds); n <= len(buf) {
		r = buf[:n]
	} else {
		r = make([]int64, n)
	}
	if err := g.vec(r, v); err != nil {
		return fmt.Errorf("banker: release: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.idx < 0 {
		return fmt.Errorf("banker: release: %w", ErrUnregistered)
	}
	for i, a := range r {
		if a > w.alloc[i] {
			return fmt.Errorf("banker: release: kind %q: release %d, held %d: %w",
				g.kinds[i], a, w.alloc[i], ErrOverRelease)
		}
	}
	g.release(w, r)
	g.wake()
	return nil
}

// Unregister releases everything the worker holds, fails its waiting
// Acquire calls with ErrUnregistered, removes it from the Governor and
// grants what it can to the other waiters. Later calls return
// ErrUnregistered.
func (w *Worker) Unregister() error {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.idx < 0 {
		return fmt.Errorf("banker: unregister: %w", ErrUnregistered)
	}
	for i, a := range w.alloc {
		g.avail[i] += a
	}
	last := g.workers[len(g.workers)-1]
	last.idx = w.idx
	g.workers[w.idx] = last
	g.workers[len(g.workers)-1] = nil
	g.workers = g.workers[:len(g.workers)-1]
	w.idx = -1
	for j, o := range g.order {
		p := w.pos[j]
		copy(o[p:], o[p+1:])
		o[len(o)-1] = nil
		o = o[:len(o)-1]
		for q := p; q < len(o); q++ {
			o[q].pos[j] = q
		}
		g.order[j] = o
	}
	g.waiters = slices.DeleteFunc(g.waiters, func(x *waiter) bool {
		if x.w != w {
			return false
		}
		x.err = ErrUnregistered
		close(x.ready)
		return true
	})
	g.wake()
	return nil
}

// Snapshot returns a copy of the state.
func (g *Governor) Snapshot() Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.snapshot()
}

func (g *Governor) snapshot() Snapshot {
	s := Snapshot{
		Totals:    g.toVector(g.total),
		Available: g.toVector(g.avail),
		Workers:   make([]WorkerState, 0, len(g.workers)),
		Waiting:   len(g.waiters),
	}
	for _, w := range g.workers {
		s.Workers = append(s.Workers, WorkerState{ID: w.id, Max: g.toVector(w.max), Allocated: g.toVector(w.alloc)})
	}
	slices.SortFunc(s.Workers, func(a, b WorkerState) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return s
}

// tryGrant grants r (within w's need) if available and safe; under mu.
func (g *Governor) tryGrant(w *Worker, r []int64) bool {
	for i, a := range r {
		if a > g.avail[i] || a > w.need[i] {
			return false
		}
	}
	g.apply(w, r, 1)
	if !g.safe(w) {
		g.apply(w, r, -1)
		return false
	}
	if g.opts.OnGrant != nil {
		g.opts.OnGrant(g.snapshot())
	}
	return true
}

func (g *Governor) release(w *Worker, r []int64) { g.apply(w, r, -1) }

// apply moves r from available to w's allocation (sign 1) or back (-1).
func (g *Governor) apply(w *Worker, r []int64, sign int64) {
	for j, a := range r {
		if a == 0 {
			continue
		}
		g.avail[j] -= sign * a
		w.alloc[j] += sign * a
		w.need[j] -= sign * a
		g.fix(j, w)
	}
}

// fix moves w to its place in g.order[j] after its need of j changed.
func (g *Governor) fix(j int, w *Worker) {
	o := g.order[j]
	p, v := w.pos[j], w.need[j]
	for p > 0 && o[p-1].need[j] > v {
		o[p] = o[p-1]
		o[p].pos[j] = p
		p--
	}
	for p < len(o)-1 && o[p+1].need[j] < v {
		o[p] = o[p+1]
		o[p].pos[j] = p
		p++
	}
	o[p] = w
	w.pos[j] = p
}

// wake grants, in FIFO order, the waiters that have become grantable;
// under mu.
func (g *Governor) wake() {
	kept := g.waiters[:0]
	for _, wt := range g.waiters {
		if wt.w.idx >= 0 && g.tryGrant(wt.w, wt.req) {
			close(wt.ready)
			continue
		}
		kept = append(kept, wt)
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
}
