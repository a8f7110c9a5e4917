// Package tcpproxy is a TCP proxy on loopback between two processes of one
// machine. It can delay every byte it forwards, both ways, by a fixed
// time (a network's round trip: the bench's work API slaves and their
// master, as if the slaves ran at a distance), and be taken down and
// brought back (a server outage without touching the server: tests), or
// partitioned and healed (a network that holds packets: the connections
// stay open, nothing arrives, and what was sent arrives late).
package tcpproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections it accepts to one address.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration // one way
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  bool
	// healed is closed when a partition heals; nil when not partitioned
	healed chan struct{}
}

// Start listens on a free loopback port and forwards each connection to
// target, delaying what goes each way by rtt/2 (so a request and its
// answer take rtt more than they would directly; 0: no delay).
func Start(target string, rtt time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, delay: rtt / 2, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDown takes the target away (every open connection is cut and new
// ones are closed at once) or brings it back.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// SetPartitioned cuts the network between the two sides without closing
// anything (true) or heals it (false). While partitioned, connections stay
// open and new ones are accepted, but nothing is forwarded either way: what
// either side sends waits in the proxy and the kernel's buffers and is
// delivered when the partition heals, even if its sender has closed the
// connection meanwhile (a request its client gave up on still reaches the
// server, late).
func (p *Proxy) SetPartitioned(partitioned bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case partitioned && p.healed == nil:
		p.healed = make(chan struct{})
	case !partitioned && p.healed != nil:
		close(p.healed)
		p.healed = nil
	}
}

// waitHealed returns once the proxy is not partitioned.
func (p *Proxy) waitHealed() {
	for {
		p.mu.Lock()
		ch := p.healed
		p.mu.Unlock()
		if ch == nil {
			return
		}
		<-ch
	}
}

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.SetDown(true)
	p.SetPartitioned(false)
	p.wg.Wait()
	return err
}

// track adds c to the connections SetDown cuts; false while down.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

// serve forwards one connection both ways until either side ends it.
func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	if !p.track(in) {
		in.Close()
		return
	}
	defer p.untrack(in)
	p.waitHealed()
	out, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(out, in) }()
	go func() { defer wg.Done(); p.pipe(in, out) }()
	wg.Wait()
}

// pipe copies src to dst until either side ends, then closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer src.Close()
	defer dst.Close()
	if p.delay <= 0 {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.waitHealed()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return // EOF, a reset or a cut
			}
		}
	}
	// each read is written delay after it was read, in order
	type chunk struct {
		b   []byte
		due time.Time
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.due))
			p.waitHealed()
			if _, err := dst.Write(c.b); err != nil {
				dst.Close() // the reader ends when src closes
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
		}
		if err != nil {
			break // EOF, a reset or a cut: the other side learns it as a close
		}
	}
	close(q)
	<-done
}
