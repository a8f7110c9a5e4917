package slaved

import "sync"

// What holds a host, not just the URL (handle): a 429; a robots.txt that
// is unreachable or answers 5xx; a 503 when most of the host's recent
// answers to this slave were 503 too (overload). A single URL that answers
// 503 (a broken page on a healthy host) is that URL's problem: only its
// retry waits (its Retry-After, else the retry backoff), and the rest of
// the host is fetched meanwhile.

// overloadWindow is how many recent answers per host overload looks at.
const overloadWindow = 8

// overload remembers, per host, whether each of the last overloadWindow
// answers this slave got was a 503. Each slave keeps its own: a host
// overloaded answers every slave so, and a broken URL is one of many
// answers. Memory is bounded: past limit hosts, the oldest are forgotten.
type overload struct {
	mu    sync.Mutex
	hosts map[string]*answers
	order []string
	limit int
}

// answers is a host's last answers, a bit per answer (1: 503), newest in
// bit 0.
type answers struct {
	bits uint8
	n    uint8 // answers recorded, at most overloadWindow
}

func newOverload() *overload { return &overload{hosts: map[string]*answers{}, limit: 50000} }

// observe records an answer of host (unavailable: 503) and reports whether
// the host looks overloaded: this answer is a 503, and at least two of its
// last answers, and more than half of them, were 503. The first 503 of a
// host holds only its URL; a second one among few answers holds the host.
func (o *overload) observe(host string, unavailable bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.hosts[host]
	if !ok {
		if len(o.hosts) >= o.limit {
			drop := o.order[:len(o.order)/2]
			for _, h := range drop {
				delete(o.hosts, h)
			}
			o.order = append([]string(nil), o.order[len(drop):]...)
		}
		a = &answers{}
		o.hosts[host] = a
		o.order = append(o.order, host)
	}
	a.bits <<= 1
	if unavailable {
		a.bits |= 1
	}
	if a.n < overloadWindow {
		a.n++
	}
	if !unavailable {
		return false
	}
	bad := 0
	for i := range a.n {
		if a.bits&(1<<i) != 0 {
			bad++
		}
	}
	return bad >= 2 && 2*bad > int(a.n)
}
