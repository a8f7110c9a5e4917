package dnscache

// Pre-resolution: the hosts of claimed tasks and found links, resolved by a
// bounded pool of workers ahead of their fetches.

// Prefetch resolves in the background the hosts that are not IP literals,
// not already cached, queued or being resolved. It returns at once; names
// beyond the queue's room are dropped and counted.
func (r *Resolver) Prefetch(hosts []string) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.closed {
		return
	}
	dropped, now := 0, r.now()
	for _, h := range hosts {
		name := normalize(h)
		if k, _ := r.classify(name); k != kindName || r.queued[name] || r.inflight[name] != nil {
			continue
		}
		if r.entry(name, now) != nil {
			continue
		}
		if len(r.queue) >= r.opt.MaxPending {
			dropped++
			continue
		}
		r.queue = append(r.queue, name)
		r.queued[name] = true
	}
	if dropped > 0 {
		r.dropped.Add(uint64(dropped))
		r.log.Debug("dnscache: prefetch queue full", "dropped", dropped)
	}
	for want := min(r.opt.MaxWorkers, (len(r.queue)+3)/4); r.workers < want; r.workers++ {
		r.wg.Add(1)
		go r.worker()
	}
}

// worker resolves queued names until the queue is empty or the resolver
// closes.
func (r *Resolver) worker() {
	defer r.wg.Done()
	for {
		r.fmu.Lock()
		if r.closed || len(r.queue) == 0 {
			r.workers--
			r.fmu.Unlock()
			return
		}
		name := r.queue[0]
		r.queue[0] = ""
		r.queue = r.queue[1:]
		if len(r.queue) == 0 {
			r.queue = nil
		}
		delete(r.queued, name)
		r.fmu.Unlock()

		if r.entry(name, r.now()) != nil {
			continue
		}
		c, started, err := r.flight(name)
		if err != nil {
			continue
		}
		if started {
			r.prefetched.Add(1)
		}
		select {
		case <-c.done:
		case <-r.base.Done():
		}
	}
}
