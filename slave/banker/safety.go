package banker

// The banker's safety check: whether every worker can still finish in some
// order with what is free (a safe sequence), the test a grant must pass.

// Safe runs the full safety search over the current state. It is always
// true unless the package is broken; it is there for tests and metrics.
func (g *Governor) Safe() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.safe(nil)
}

// safe reports whether the state is safe. With a requester, it assumes the
// state was safe before the requester's last grant and stops once the
// requester can finish; with nil it searches over all workers. Under mu.
func (g *Governor) safe(requester *Worker) bool {
	work := g.work
	copy(work, g.avail)
	if requester != nil && fits(requester.need, work) {
		return true
	}
	k, n := len(g.kinds), len(g.workers)
	for _, w := range g.workers {
		w.cnt = 0
	}
	clear(g.ptr)
	ready := g.ready[:0]
	advance := func(j int) {
		o, p := g.order[j], g.ptr[j]
		for p < n && o[p].need[j] <= work[j] {
			w := o[p]
			p++
			w.cnt++
			if w.cnt == k {
				ready = append(ready, w)
			}
		}
		g.ptr[j] = p
	}
	for j := range k {
		advance(j)
	}
	finished := 0
	safe := false
	for len(ready) > 0 {
		w := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		if w == requester {
			safe = true
			break
		}
		finished++
		for j, a := range w.alloc {
			if a != 0 {
				work[j] += a
				advance(j)
			}
		}
	}
	if requester == nil {
		safe = finished == n
	}
	clear(ready[:cap(ready)])
	g.ready = ready[:0]
	return safe
}

func fits(need, work []int64) bool {
	for i, a := range need {
		if a > work[i] {
			return false
		}
	}
	return true
}

// Safe reports whether the snapshot's state is safe, by the textbook
// Work/Finish search (O(workers² × kinds)), independent of the Governor's.
func (s Snapshot) Safe() bool {
	_, ok := s.SafeSequence()
	return ok
}

// SafeSequence returns a safe sequence of worker IDs found by the textbook
// search (scanning the workers in ID order, repeatedly, finishing each one
// whose need fits in Work) and whether every worker could finish.
func (s Snapshot) SafeSequence() ([]uint64, bool) {
	work := make(Vector, len(s.Available))
	for k, a := range s.Available {
		work[k] = a
	}
	finish := make([]bool, len(s.Workers))
	var seq []uint64
	for progress := true; progress; {
		progress = false
		for i, w := range s.Workers {
			if finish[i] || !needFits(w, work) {
				continue
			}
			for k, a := range w.Allocated {
				work[k] += a
			}
			finish[i] = true
			seq = append(seq, w.ID)
			progress = true
		}
	}
	return seq, len(seq) == len(s.Workers)
}

func needFits(w WorkerState, work Vector) bool {
	for k, m := range w.Max {
		if m-w.Allocated[k] > work[k] {
			return false
		}
	}
	return true
}
