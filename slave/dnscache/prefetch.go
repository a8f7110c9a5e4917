package dnscache

// Pre-resolution: the hosts of claimed tasks and found links, resolved by a
// bounded pool of workers ahead of their fetches.

// Prefetch resolves in the background the hosts that are not IP literals,
// not already cached, queued or being resolved. It returns at once; names
// beyond the queue's room are dropped and counted.
func (r *Resolver) Prefetch(hosts []string) { r.prefetch(hosts, false) }

// PrefetchIfRoom is Prefetch for names that may not be fetched here (the
// hosts of found links): it queues no more names than the positive cache
// has room for without evicting an entry, and counts the others as
// skipped.
func (r *Resolver) PrefetchIfRoom(hosts []string) { r.prefetch(hosts, true) }

func (r *Resolver) prefetch(hosts []string, ifRoom bool) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.closed {
		return
	}
	room := r.opt.MaxPending
	if ifRoom {
		r.cmu.RLock()
		room = r.opt.MaxEntries - r.pos.len()
		r.cmu.RUnlock()
		room -= len(r.queue) + len(r.inflight)
	}
	dropped, skipped, now := 0, 0, r.now()
	for _, h := range hosts {
		name := normalize(h)
		if k, _ := r.classify(name); k != kindName || r.queued[name] || r.inflight[name] != nil {
			continue
		}
		if r.entry(name, now) != nil {
			continue
		}
		if ifRoom && room <= 0 {
			skipped++
			continue
		}
		if len(r.queue) >= r.opt.MaxPending {
			dropped++
			continue
		}
		room--
		r.queue = append(r.queue, name)
		r.queued[name] = true
	}
	if skipped > 0 {
		r.skipped.Add(uint64(skipped))
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
